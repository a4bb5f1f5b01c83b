#!/usr/bin/env bash
# The full test suite: formatting, lints, runtime setup (idempotent) and every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${CARGO_TARGET_DIR:-target}/debug"

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy (warnings denied)"
cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo build"
cargo build --workspace --all-targets
echo "== frognano setup (fetches, verifies, compiles and snapshots the runtime once; cached afterwards)"
"$bin/frognano" setup --all-images
echo "== cargo test"
cargo test --workspace
echo "== Python package: wheel into a fresh virtualenv, tests against the installed package"
bash bindings-python/ci.sh
echo "== C library: header check, example natively, under valgrind and with AddressSanitizer"
bash bindings-c/ci.sh
echo "== examples"
"$bin/examples/run_tests" examples/repos/textkit | tail -1
"$bin/frognano" test examples/repos/tinyparse
"$bin/frognano" eval --out "$(mktemp -d)/records.jsonl"
"$bin/frognano" eval --policy noop | grep -q "0 (0.0%)"
