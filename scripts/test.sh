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
# Outputs are captured before matching: `cmd | grep -q` ends the pipe at the first match.
expect() { local pattern="$1"; shift; local out; out="$("$@")"; grep -q -- "$pattern" <<<"$out" || { echo "$out"; echo "expected '$pattern' in the output of: $*" >&2; return 1; }; }
expect "0 (0.0%)" "$bin/frognano" eval --policy noop
synth_dir="$(mktemp -d)"
"$bin/frognano" synth examples/repos/textkit -n 12 --max-bugs 2 --hint-levels 0,1,2,3 -o "$synth_dir/tasks.jsonl"
expect "12 (100.0%)" "$bin/frognano" eval --tasks "$synth_dir/tasks.jsonl"
expect "0 (0.0%)" "$bin/frognano" eval --tasks "$synth_dir/tasks.jsonl" --policy noop
train_dir="$(mktemp -d)"
"$bin/frognano" train --config examples/train/smoke.toml -o "$train_dir"
test -s "$train_dir/curves.png" && test "$(wc -l < "$train_dir/metrics.jsonl")" -eq 2
expect "resolved" "$bin/frognano" eval --tasks "$train_dir/held_out.jsonl" --policy "repair:$train_dir/checkpoint.json"
