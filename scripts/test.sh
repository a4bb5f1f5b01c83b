#!/usr/bin/env bash
# The full test suite: formatting, lints, runtime setup (idempotent) and every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${CARGO_TARGET_DIR:-target}/debug"
# Each section's start, with the seconds since the script started (where CI time goes).
section() { echo "== $* [${SECONDS} s]"; }

# require COMMAND PACKAGE (apt-get when missing).
source scripts/require.sh
# The serving environment compiles llama.cpp (C++).
require g++ g++

section "cargo fmt --check"
cargo fmt --all -- --check
section "cargo clippy (warnings denied)"
cargo clippy --workspace --all-targets -- -D warnings
section "cargo build"
cargo build --workspace --all-targets
section "frognano setup (fetches, verifies, compiles and snapshots the runtime once; cached afterwards)"
"$bin/frognano" setup --all-images
section "frognano models setup (inference environment: pinned, hash-checked Python packages and ONNX Runtime)"
"$bin/frognano" models setup
# The serving environment compiles llama.cpp (CPU) while the learner's 3 GB of wheels download
# (network and disk), so the two install side by side.
section "frognano models setup --serving (llama.cpp's server built once from its pinned sdist, and the openai client; about 11 minutes the first time, cached), in the background"
serving_log="$(mktemp)"
"$bin/frognano" models setup --serving >"$serving_log" 2>&1 &
serving_pid=$!
section "frognano models setup --learner (the PyTorch learner's environment: torch, transformers, peft; pinned, hash-checked, about 3 GB, cached)"
learner_env="$("$bin/frognano" models setup --learner | sed -n 's/^learner environment: //p')"
test -x "$learner_env/bin/python"
section "trainer frameworks of the integrations (gymnasium, TRL, verl, SkyRL, verifiers, OpenRLHF at their tested versions; pinned, hash-checked, cached)"
integrations_env="$(bash bindings-python/integrations/setup-env.sh "$learner_env")"
wait "$serving_pid" || { cat "$serving_log"; echo "frognano models setup --serving failed" >&2; exit 1; }
tail -1 "$serving_log"
section "cargo test"
cargo test --workspace
section "PyTorch learner: its tests in the learner environment"
"$learner_env/bin/python" -m pytest bindings-python/tests/learner -q -p no:cacheprovider
section "Python package: wheel into a fresh virtualenv, tests against the installed package"
FROGNANO_LEARNER_ENV="$learner_env" FROGNANO_INTEGRATIONS_ENV="$integrations_env" bash bindings-python/ci.sh
section "C library: header check, example natively, under valgrind and with AddressSanitizer"
bash bindings-c/ci.sh
section "examples"
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
section "corpus: local trees as environments (zero configuration), tasks across them, a dataset"
corpus_dir="$(mktemp -d)/corpus"
printf '%s\n' "$PWD/examples/repos/tinyparse" "$PWD/examples/repos/textkit" > "$corpus_dir.list"
"$bin/frognano" corpus build "$corpus_dir" --from "$corpus_dir.list"
expect "2 of 2 entries ready" "$bin/frognano" corpus list "$corpus_dir"
"$bin/frognano" corpus synth "$corpus_dir" -n 4
"$bin/frognano" corpus export "$corpus_dir" -o "$corpus_dir/dataset"
test -s "$corpus_dir/dataset/tasks.jsonl" && grep -q "Tasks per operator" "$corpus_dir/dataset/README.md"
section "local models: tiny model (policy in the environment, agent), SmolLM2 (fetch, check against the numpy reference, generate), benchmark"
tiny_dir="$(mktemp -d)"
"$bin/frognano" models tiny "$tiny_dir"
"$bin/frognano" generate --model "$tiny_dir/int4" --prompt "hello" --prompt "fix the failing test" --max-new-tokens 8 --temperature 0.8 --json
expect "episodes" "$bin/frognano" eval --policy "onnx:$tiny_dir/int4" --limit 2 --max-steps 2
agent_repo="$(mktemp -d)/tinyparse"
cp -r examples/repos/tinyparse "$agent_repo"
# The bug of the first sample task, so that some tests fail.
python3 -c "import json; print(json.loads(open('examples/tasks/sample.jsonl').readline())['bug_patch'], end='')" > "$agent_repo.diff"
(cd "$agent_repo" && git apply "$agent_repo.diff")
before="$(cd "$agent_repo" && find . -type f -exec sha256sum {} + | sort | sha256sum)"
"$bin/frognano" agent "$agent_repo" --model "$tiny_dir/int4" --max-steps 2 --max-new-tokens 16 || test $? -eq 1
after="$(cd "$agent_repo" && find . -type f -exec sha256sum {} + | sort | sha256sum)"
test "$before" = "$after" || { echo "frognano agent changed the repository without --apply" >&2; exit 1; }
section "served models: frognano serve (tiny model) driven by frognano eval and frognano agent over HTTP"
serve_port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$bin/frognano" serve --model "$tiny_dir/int4" --served-model-name tiny --port "$serve_port" --threads 1 &
serve_pid=$!
python3 - "$serve_port" <<'PY'
import sys, time, urllib.request
for _ in range(300):
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=1)
        break
    except OSError:
        time.sleep(0.2)
else:
    sys.exit("frognano serve did not come up")
PY
expect "episodes" "$bin/frognano" eval --policy "openai:http://127.0.0.1:$serve_port/v1@tiny" --limit 2 --max-steps 2 --max-new-tokens 16
"$bin/frognano" agent "$agent_repo" --endpoint "http://127.0.0.1:$serve_port/v1" --model tiny --max-steps 2 --max-new-tokens 16 || test $? -eq 1
kill -TERM "$serve_pid"
wait "$serve_pid"  # a graceful stop exits 0
"$bin/frognano" models fetch smollm2-135m
"$bin/frognano" models check smollm2-135m
expect "def " "$bin/frognano" generate --prompt "Write a Python function that reverses a string." --max-new-tokens 40
# Benchmarks (bench policy, bench learner, bench serve) are measurements, run by hand: see the README.
section "all tests passed"
