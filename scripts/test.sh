#!/usr/bin/env bash
# The full test suite: formatting, lints, runtime setup (idempotent) and every test.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy (warnings denied)"
cargo clippy --workspace --all-targets -- -D warnings
echo "== frognano setup (fetches and verifies the runtime once; cached afterwards)"
cargo run -q -p frognano-cli -- setup
echo "== cargo test"
cargo test --workspace
echo "== examples"
cargo run -q -p frognano-sandbox --example run_tests -- examples/repos/textkit | tail -1
cargo run -q -p frognano-cli -- test examples/repos/tinyparse
