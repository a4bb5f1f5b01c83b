#!/usr/bin/env bash
# The full test suite: formatting, lints, runtime setup (idempotent) and every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${CARGO_TARGET_DIR:-target}/debug"
# require COMMAND PACKAGE (apt-get when missing); section LABEL, section_table (seconds per
# section, printed at the end, also when a section fails).
source scripts/require.sh
source scripts/sections.sh
# On any exit, a failed setup included, the prefetched wheels (4 GB) are removed too.
prefetched_wheels=""
trap 'status=$?; [ -z "$prefetched_wheels" ] || rm -rf "$prefetched_wheels"; section_table "$status"; exit "$status"' EXIT

# Background work: `background LABEL COMMAND...` starts COMMAND with its output in a log;
# `background_wait LABEL` waits for it, adds its seconds to the table, and shows its log and
# fails if it failed.
logs="$(mktemp -d)"
declare -A background_pids
background() {
    local label=$1
    shift
    (
        started=$SECONDS
        status=0
        "$@" >"$logs/$label.log" 2>&1 || status=$?
        cpu_seconds cpu
        echo "$((SECONDS - started)) $cpu" >"$logs/$label.seconds"
        exit "$status"
    ) &
    background_pids[$label]=$!
}
background_wait() {
    local label=$1 status=0 seconds cpu
    wait "${background_pids[$label]}" || status=$?
    read -r seconds cpu <"$logs/$label.seconds" 2>/dev/null || seconds="?"
    background_record "$label" "$seconds" "${cpu:-}"
    if [ "$status" -ne 0 ]; then
        cat "$logs/$label.log" >&2
        echo "$label failed (exit status $status)" >&2
        exit 1
    fi
}

# Test lanes: `lane LABEL FUNCTION` runs FUNCTION in the background with sections of its own
# (their rows join the table at the end) and its output in a log; `lane_wait LABEL` waits for it
# and shows the log. The two lanes below share the machine's cores: most of what they run is
# one sandboxed interpreter at a time, which leaves a core idle when run alone.
declare -A lane_pids
lane() {
    local label=$1
    shift
    section_extra_rows+=("$logs/lane-$label.rows")
    (
        section_labels=() section_seconds=() section_cpu=() section_current=""
        trap 'section_rows "$label: " >"$logs/lane-$label.rows"' EXIT
        "$@"
        section_end
    ) >"$logs/lane-$label.log" 2>&1 &
    lane_pids[$label]=$!
}
lane_wait() {
    local label=$1 status=0
    wait "${lane_pids[$label]}" || status=$?
    echo "---------------- lane $label (exit status $status) ----------------"
    cat "$logs/lane-$label.log"
    return "$status"
}

# The inference, learner and serving environments' pinned wheels are fetched into a folder
# while the compiler runs (the network is idle then); those environments install from it alone
# when every file came (`from_prefetched`), and it is removed once they are installed. pip's own
# cache is left out: with it, the 4 GB of the learner's wheels (torch and its CUDA packages)
# would lie on disk twice. The integrations' environment builds a few source packages and
# installs from the index. Best effort: when a file fails here, the installs fetch everything
# from the index themselves and show its error.
prefetched_wheels="$(mktemp -d)"
prefetch_wheels() {
    local file
    for file in llm/python/requirements.txt llm/python/requirements-learner.txt \
        llm/python/requirements-serving.txt; do
        python3 -m pip download -q --disable-pip-version-check --no-cache-dir --no-deps \
            --require-hashes --only-binary=:all: -d "$prefetched_wheels" -r "$file" || {
            echo "prefetch of $file failed; the installs will fetch from the index"
            return 0
        }
    done
    touch "$prefetched_wheels/.complete"
}
# from_prefetched COMMAND...: COMMAND's pip installs take the prefetched files. pip prefers the
# index's copy of a file to a --find-links one, so the index is switched off for them.
from_prefetched() {
    if [ -f "$prefetched_wheels/.complete" ]; then
        PIP_NO_INDEX=1 PIP_FIND_LINKS="$prefetched_wheels" "$@"
    else
        "$@"
    fi
}

section "cargo fmt --check"
cargo fmt --all -- --check

# One compile of the dependency tree serves the lints, the tests and the binaries: clippy's
# driver compiles the workspace's crates (lints with warnings denied, then code generation)
# where `cargo clippy` would check them, and every later cargo command here (tests, the C and
# Python builds) inherits the same wrapper, so nothing is compiled twice. Without the driver
# (a toolchain without clippy) the lints run apart as `cargo clippy`.
clippy_driver="$(rustc --print sysroot)/bin/clippy-driver"
# At the lowest priority: the downloads (hashing, decompression) take the cores only when the
# compiler leaves one idle.
background prefetch nice -n 19 bash -c "prefetched_wheels=$prefetched_wheels; $(declare -f prefetch_wheels); prefetch_wheels"
if [ -x "$clippy_driver" ]; then
    section "cargo build with clippy's lints (warnings denied)"
    export RUSTC_WORKSPACE_WRAPPER="$clippy_driver"
    # cargo-clippy's way of handing `-- -D warnings` to its driver.
    export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
    cargo build --workspace --all-targets
else
    section "cargo clippy (warnings denied)"
    cargo clippy --workspace --all-targets -- -D warnings
    section "cargo build"
    cargo build --workspace --all-targets
fi
section "cargo deny check licenses bans sources (deny.toml)"
bash scripts/deny.sh
background_wait prefetch

# The runtime (CPU: compiling and snapshotting the interpreter images) is set up while the
# Python environments install (disk and network) beside it; the wheel is built here too, the
# last cargo build of the run (see the lanes below).
section "setup: runtime images, the inference, learner, integrations and serving environments, the wheel"
background serving from_prefetched "$bin/frognano" models setup --serving
learner_and_integrations() {
    from_prefetched "$bin/frognano" models setup --learner | sed -n 's/^learner environment: //p' >"$logs/learner_env"
    test -x "$(cat "$logs/learner_env")/bin/python"
    bash bindings-python/integrations/setup-env.sh "$(cat "$logs/learner_env")" >"$logs/integrations_env"
}
background learner learner_and_integrations
"$bin/frognano" setup --all-images
from_prefetched "$bin/frognano" models setup
wheel_dir="$(mktemp -d)"
bash bindings-python/ci.sh --build-wheel "$wheel_dir"
background_wait learner
background_wait serving
tail -1 "$logs/serving.log"
rm -rf "$prefetched_wheels"
learner_env="$(cat "$logs/learner_env")"
integrations_env="$(tail -1 "$logs/integrations_env")"

# The tests run in two lanes side by side. No cargo command runs in lane B: `cargo test` in
# lane A holds the build directory, and lane B uses what the build above made.
section "tests in two lanes (A: cargo test, CLI examples, learner; B: Python package, C)"
lane_a() {
    section "cargo test"
    # frognano-python has no Rust tests (pytest tests its wheel); leaving it out keeps cargo
    # from rebuilding the extension that maturin just built with its own environment.
    cargo test --workspace --exclude frognano-python
    cli_examples
    section "PyTorch learner tests (learner environment)"
    "$learner_env/bin/python" -m pytest bindings-python/tests/learner -q -p no:cacheprovider --durations=15
}
lane_b() {
    section "Python package: tests against the installed wheel, examples"
    FROGNANO_WHEEL_DIR="$wheel_dir" FROGNANO_LEARNER_ENV="$learner_env" \
        FROGNANO_INTEGRATIONS_ENV="$integrations_env" bash bindings-python/ci.sh
    section "C library: examples with AddressSanitizer and under valgrind"
    FROGNANO_PREBUILT=1 bash bindings-c/ci.sh
}
cli_examples() {
section "CLI examples: test, eval, synth, train"
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
section "corpus: local trees as environments, tasks across them, a dataset"
corpus_dir="$(mktemp -d)/corpus"
printf '%s\n' "$PWD/examples/repos/tinyparse" "$PWD/examples/repos/textkit" > "$corpus_dir.list"
"$bin/frognano" corpus build "$corpus_dir" --from "$corpus_dir.list"
expect "2 of 2 entries ready" "$bin/frognano" corpus list "$corpus_dir"
"$bin/frognano" corpus synth "$corpus_dir" -n 4
"$bin/frognano" corpus export "$corpus_dir" -o "$corpus_dir/dataset"
test -s "$corpus_dir/dataset/tasks.jsonl" && grep -q "Tasks per operator" "$corpus_dir/dataset/README.md"
"$bin/frognano" corpus summary "$corpus_dir" -o "$corpus_dir.summary.jsonl"
expect "2 of 2 entries ready" "$bin/frognano" corpus list "$corpus_dir.summary.jsonl"
section "local models: tiny model in an environment and the agent; SmolLM2 fetch, check, generate"
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
section "served models: frognano serve driven by eval and agent over HTTP"
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
}
lane a lane_a
lane b lane_b
lanes_status=0
lane_wait a || lanes_status=$?
lane_wait b || lanes_status=$?
[ "$lanes_status" -eq 0 ] || { echo "a test lane failed" >&2; exit "$lanes_status"; }
# Benchmarks (bench policy, bench learner, bench serve) are measurements, run by hand: see
# docs/benchmarks.md.
section_end
echo "all tests passed"
