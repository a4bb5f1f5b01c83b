#!/usr/bin/env bash
# CI of the C bindings: builds libfrognano, checks that the committed header is current,
# compiles the C examples (run_tests.c, agent_env.c, synth_tasks.c, train_policy.c,
# local_model.c) against the header with warnings as errors, and runs them with
# AddressSanitizer (+ LeakSanitizer) and under valgrind (memcheck); synth_tasks.c under memcheck
# only on its error path, train_policy.c without its training run, and local_model.c (on a tiny
# model made by `frognano models tiny`) under ASAN only (see the valgrind section).
#
# Run from the repository root:  bash bindings-c/ci.sh
#
# Needs gcc and valgrind (installed with apt-get when missing and possible). The runtime cache
# (~/.cache/frognano, or $FROGNANO_CACHE) is prepared on first use like every other entry point.
set -euo pipefail

target="${CARGO_TARGET_DIR:-target}"
lib_dir="$target/debug"
work="$(mktemp -d "${TMPDIR:-/tmp}/frognano-c-ci.XXXXXX")"
trap 'rm -rf "$work"' EXIT
started=$SECONDS

step() { printf '\n== %s [%s s]\n' "$*" "$((SECONDS - started))"; }

# require COMMAND PACKAGE (apt-get when missing).
source "$(dirname "$0")/../scripts/require.sh"

# Runs a command that must exit with the given status.
expect_status() {
    local want=$1 status=0
    shift
    "$@" || status=$?
    if [ "$status" -ne "$want" ]; then
        echo "expected exit status $want, got $status: $*" >&2
        exit 1
    fi
}

require gcc gcc
require valgrind valgrind

# FROGNANO_PREBUILT=1 (scripts/test.sh): the workspace is built and the header test ran in its
# `cargo test`; no cargo command here (one could wait on the other lane's cargo for the build
# directory's lock). Otherwise the build is the workspace's with every target, so that
# dependencies resolve to the features of `cargo build --workspace --all-targets` and nothing
# compiled there is compiled again (the Python extension is left out: maturin builds it).
if [ "${FROGNANO_PREBUILT:-}" != 1 ]; then
    step "cargo build --workspace --all-targets (frognano-python excluded)"
    cargo build --workspace --all-targets --exclude frognano-python
    step "header is current (tests/header.rs; FROGNANO_UPDATE_HEADER=1 regenerates it)"
    cargo test -q --workspace --exclude frognano-python --test header
fi

# local_model.c runs on a tiny randomly initialised model (the layout, tokenizer and chat
# template of the real ones; converted by the inference environment, installed into the cache
# on first use).
step "frognano models tiny (for examples/c/local_model.c)"
"$target/debug/frognano" models tiny "$work/tiny" >/dev/null
tiny_model="$work/tiny/fp32"

# A repository whose second test aborts the interpreter: the guest executes a wasm `unreachable`
# (ud2), which wasmtime catches with its SIGILL handler and reports as a crashed run. It checks
# that wasmtime's signal handlers work under each tool. The example exits 1 for it.
trap_repo="$work/trap-repo"
mkdir -p "$trap_repo/tests"
cat > "$trap_repo/tests/test_trap.py" <<'EOF'
def test_first():
    pass


def test_abort():
    import faulthandler

    faulthandler._sigabrt()
EOF

# A deliberate leak (an error object never freed): each leak checker must report it, which
# proves the checker is live rather than silently disabled.
cat > "$work/leak.c" <<'EOF'
#include <stdio.h>
#include "frognano.h"
int main(void) {
    FrognanoSandbox *sandbox = NULL;
    FrognanoError *error = frognano_sandbox_new("no-such-image", &sandbox);
    printf("leaking error %d\n", (int)frognano_error_code(error));
    return sandbox == NULL ? 0 : 1;
}
EOF

cflags=(-Wall -Wextra -Werror -std=c11 -g -I bindings-c/include)
libs=(-L"$lib_dir" -lfrognano)
export LD_LIBRARY_PATH="$lib_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# AddressSanitizer ---------------------------------------------------------------------------
#
# Only the C code is instrumented; ASAN's allocator and LeakSanitizer still see every
# allocation of the Rust library (it uses the system malloc). wasmtime installs its own
# SIGSEGV/SIGBUS/SIGFPE/SIGILL handlers for traps after ASAN installed its SIGSEGV, SIGBUS and
# SIGFPE handlers, and chains to them for faults outside wasm code:
#   allow_user_segv_handler=1  lets wasmtime replace ASAN's handlers (so wasm traps work);
#   handle_segv/handle_sigbus/handle_sigfpe=1  keep ASAN's reports for real host crashes,
#       reached through wasmtime's chaining;
#   detect_leaks=1  LeakSanitizer at exit (the default on x86-64 Linux, made explicit).
#   exitcode=99  distinguishes a sanitizer report from the example's own exit statuses.
asan_options=(detect_leaks=1 allow_user_segv_handler=1 handle_segv=1 handle_sigbus=1
    handle_sigfpe=1 halt_on_error=1 exitcode=99)
ASAN_OPTIONS="$(IFS=:; echo "${asan_options[*]}")"
export ASAN_OPTIONS
asan_flags=(-fsanitize=address -fno-omit-frame-pointer)

step "gcc: examples/c/{run_tests,agent_env,synth_tasks,train_policy,local_model}.c against libfrognano.so, plain (for valgrind) and with AddressSanitizer"
for example in run_tests agent_env synth_tasks train_policy local_model; do
    gcc "${cflags[@]}" "examples/c/$example.c" "${libs[@]}" -o "$work/$example"
    gcc "${cflags[@]}" "${asan_flags[@]}" "examples/c/$example.c" "${libs[@]}" -o "$work/${example}_asan"
done
gcc "${cflags[@]}" "$work/leak.c" "${libs[@]}" -o "$work/leak"
gcc "${cflags[@]}" "${asan_flags[@]}" "$work/leak.c" "${libs[@]}" -o "$work/leak_asan"

# The examples run once, with AddressSanitizer: the same programs and the same checks of their
# output as a plain run, with ASAN and LeakSanitizer watching (a plain run of each as well would
# only repeat the sandboxed work).
step "run with AddressSanitizer: run_tests (a passing and a crashing guest)"
"$work/run_tests_asan" examples/repos/textkit | tail -n 3
expect_status 1 "$work/run_tests_asan" "$trap_repo" | grep -E '^(crashed|detail)'
step "run with AddressSanitizer: agent_env (an episode and the oracle's evaluation)"
"$work/agent_env_asan" examples/tasks/sample.jsonl
step "run with AddressSanitizer: synth_tasks (synthesis with the oracle's evaluation, and a suite that crashes)"
"$work/synth_tasks_asan" examples/repos/textkit 3 | grep -v '^stats: '
# A suite that crashes cannot validate bugs: FROGNANO_ERROR_CODE_SYNTHESIS (14), exit status 2.
expect_status 2 "$work/synth_tasks_asan" "$trap_repo" 1 2>&1 | grep -E 'error 14: .*ended abnormally'
# Advantages, learnability, and a tiny training run (about 40 s): one iteration of 2 tasks x 2
# rollouts, a checkpoint, the held-out evaluation.
step "run with AddressSanitizer: train_policy (advantages and a tiny training run)"
"$work/train_policy_asan" examples/repos/textkit
# A greedy chat reply of the tiny model with its first log-probabilities, and a bad request
# refused with FROGNANO_ERROR_CODE_INVALID_OPTION.
step "run with AddressSanitizer: local_model (a local model on ONNX Runtime)"
"$work/local_model_asan" "$tiny_model"

# valgrind -----------------------------------------------------------------------------------
#
# valgrind presents a virtual CPU without AVX-512, so wasmtime detects a different ISA, and
# compiled modules are cached per ISA. The sandbox keeps one compiled module per image in its
# cache (it deletes superseded ones), so valgrind runs get a cache of their own: every
# directory of the main cache is shared through symlinks except `compiled/`. Otherwise each
# valgrind run and each native run would evict the other's module.
#
# The image under valgrind is python-3.12: its module compiles once under valgrind in about a
# minute, where building python-3.15's pytest snapshot takes more than half an hour. That
# one-time compilation runs under `--tool=none` (no instrumentation, several times faster than
# memcheck); later runs find it cached and the warm-up is one fast run. Another image can be
# chosen with FROGNANO_VALGRIND_IMAGE, another cache with FROGNANO_VALGRIND_CACHE.
#
# Flags: wasmtime needs no special flag. Its large PROT_NONE reservations and signal-based
# traps work under valgrind 3.19, and its code is loaded precompiled and never modified after,
# so the default self-modifying-code checks suffice. valgrind prints two harmless notes:
# "brk segment overflow" (malloc outgrew valgrind's fixed brk segment and continues with mmap)
# and "unhandled amd64-linux syscall: 437" (openat2, unknown to valgrind 3.19; cap-std falls
# back to openat when it returns ENOSYS). No suppressions are needed: memcheck reports no error
# and no definite leak (a few bytes of thread-local bookkeeping of the runtime's threads show
# as "possibly lost", which is not an error).
main_cache="${FROGNANO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/frognano}"
vg_cache="${FROGNANO_VALGRIND_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/frognano-valgrind}"
mkdir -p "$vg_cache/compiled"
for entry in "$main_cache"/*; do
    [ -e "$entry" ] || continue
    name="$(basename "$entry")"
    [ "$name" = compiled ] || ln -sfn "$entry" "$vg_cache/$name"
done
# The guest runs tens of times slower under memcheck: run_tests gets ten minutes, not 60 s.
vg_env=(FROGNANO_CACHE="$vg_cache" FROGNANO_IMAGE="${FROGNANO_VALGRIND_IMAGE:-python-3.12}"
    FROGNANO_TIMEOUT_S=600)
memcheck=(valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
    --show-leak-kinds=definite)

# memcheck WANT_STATUS LOG COMMAND...: runs COMMAND under memcheck with vg_env (its stdout
# shown, valgrind's report in LOG) and prints the report's summary lines; prints the whole
# report and fails when the exit status is not WANT_STATUS (99: an error or a definite leak).
memcheck() {
    local want=$1 log=$2 status=0
    shift 2
    env "${vg_env[@]}" "${memcheck[@]}" --log-file="$log" "$@" || status=$?
    grep -h -E 'ERROR SUMMARY|definitely lost|All heap blocks were freed' "$log" \
        | sed 's/^==[0-9]*== /valgrind: /'
    if [ "$status" -ne "$want" ]; then
        cat "$log" >&2
        echo "expected exit status $want under memcheck, got $status" >&2
        exit 1
    fi
}

step "valgrind --tool=none warm-up (compiles the module for valgrind's CPU once; cached)"
env "${vg_env[@]}" valgrind -q --tool=none "$work/run_tests" examples/repos/textkit 2>&1 \
    | grep -E '^(setup: |image |[a-z_]+: [0-9]+ passed)'

# The memcheck runs below are independent, and valgrind runs each program on one core (it
# serialises its threads), so they run in two lanes side by side, each lane's output kept in
# a file and shown when both are done.
memcheck_trap() {
    step "valgrind memcheck: a crashing guest (wasm trap through wasmtime's SIGILL handler)"
    memcheck 1 "$work/vg-trap.log" "$work/run_tests" "$trap_repo" \
        | grep -E '^(crashed|detail|valgrind)'
}

# The agent example under memcheck runs its episode only (--skip-evaluate; two test runs, about
# two minutes): the oracle evaluation of the whole sample set is three dozen sandboxed test
# runs at about a minute each under memcheck, half an hour. The evaluation runs with ASAN
# instead (above).
memcheck_agent() {
    step "valgrind memcheck: examples/c/agent_env --skip-evaluate"
    memcheck 0 "$work/vg-agent.log" "$work/agent_env" --skip-evaluate examples/tasks/sample.jsonl
}

# synth_tasks runs under memcheck only on the crashing repository: frognano_synthesize parses
# its options, loads the repository, runs the first intake run (it crashes) and returns a
# FROGNANO_ERROR_CODE_SYNTHESIS error object, in about 40 s. A successful synthesis is not run
# under memcheck: the intake (three clean suite runs, one with coverage), the validation runs
# and the oracle's episodes are over a dozen sandboxed runs at 30 s to a minute each under
# memcheck (even one task from a tiny repository takes several minutes), far past the couple of
# minutes each memcheck step here takes. It handles memory no differently from what agent_env
# exercises under memcheck (a task set, owned JSON strings, error objects); it runs with ASAN +
# LeakSanitizer above, and tests/synth.rs covers its other paths.
memcheck_synth() {
    step "valgrind memcheck: examples/c/synth_tasks on a repository whose suite crashes"
    memcheck 2 "$work/vg-synth.log" "$work/synth_tasks" "$trap_repo" 1
}

# train_policy runs under memcheck without its training run (--skip-training): the advantages,
# learnability, error objects and a configuration the trainer refuses, in seconds. Training
# itself is dozens of sandboxed test runs (synthesis of the task pools, the rollouts, the
# held-out evaluation), an hour under memcheck; its memory handling (a handle, owned JSON
# strings, error objects) is what the other examples exercise under memcheck, and it runs
# with ASAN + LeakSanitizer above.
memcheck_train() {
    step "valgrind memcheck: examples/c/train_policy --skip-training"
    memcheck 0 "$work/vg-train.log" "$work/train_policy" --skip-training
}

# local_model.c does not run under memcheck: memcheck reports errors that are not FrogNano's,
# in the ONNX Runtime library it loads (a 4-byte memcpy whose source and destination are the same
# address, inside the prebuilt libonnxruntime, which has no symbols to suppress by) and in ld.so
# while it loads it (its SSE strncmp reading past the RPATH string, a known false positive), and
# no definite leak. It runs with ASAN + LeakSanitizer above, which instruments the
# C code and tracks every allocation of the Rust library; tests/llm.rs covers the other paths.

memcheck_leak() {
    step "valgrind memcheck: the deliberate leak is reported"
    memcheck 99 "$work/vg-leak.log" "$work/leak"
    grep -q 'definitely lost: [1-9]' "$work/vg-leak.log"
}

# Lane 1: the agent episode. Lane 2: the crashing guest, synth_tasks' error path, train_policy
# and the deliberate leak (about as long in all). run_tests on a passing suite is not run under
# memcheck as well: it calls the same functions as the crashing guest's run (a sandbox, a run,
# a report's counts, tests and JSON, the frees), and runs with AddressSanitizer above.
memcheck_agent >"$work/lane1.out" 2>&1 &
lane1=$!
lane2_status=0
(memcheck_trap && memcheck_synth && memcheck_train && memcheck_leak) >"$work/lane2.out" 2>&1 \
    || lane2_status=$?
lane1_status=0
wait "$lane1" || lane1_status=$?
cat "$work/lane1.out" "$work/lane2.out"
if [ "$lane1_status" -ne 0 ] || [ "$lane2_status" -ne 0 ]; then
    echo "valgrind memcheck failed (lane statuses $lane1_status, $lane2_status)" >&2
    exit 1
fi

step "AddressSanitizer: the deliberate leak is reported"
expect_status 99 "$work/leak_asan" 2>"$work/asan-leak.log" >/dev/null
grep -E 'SUMMARY: AddressSanitizer' "$work/asan-leak.log"

step "C bindings CI passed in $((SECONDS - started)) s"
