#!/usr/bin/env bash
# Coverage-guided fuzzing (libFuzzer, through cargo-fuzz) of every target in fuzz/, or of those
# named, each for --seconds, --parallel targets at a time. New inputs go to a working corpus
# under fuzz/target (the committed seeds in fuzz/corpus are read, not written; --merge folds the
# inputs that add coverage back into them); crashes go to fuzz/artifacts/<target>/. Ends with a
# table per target (executions, time, new inputs, crashes) also written to
# fuzz/target/fuzz-report.md, and exits 1 when any target crashed.
#
#   scripts/fuzz.sh [--seconds 600] [--parallel 2] [--merge] [--no-sanitizer] [TARGET ...]
#
# Works on the default toolchain, stable included: cargo-fuzz's nightly-only flags are enabled
# with RUSTC_BOOTSTRAP. cargo-fuzz itself is installed with cargo when missing (pinned).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=600
parallel=1
merge=0
sanitizer=address
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) seconds="$2"; shift 2 ;;
        --parallel) parallel="$2"; shift 2 ;;
        --merge) merge=1; shift ;;
        --no-sanitizer) sanitizer=none; shift ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
        *) targets+=("$1"); shift ;;
    esac
done
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(ls fuzz/fuzz_targets | sed -n 's/\.rs$//p' | sort)
fi
for t in "${targets[@]}"; do
    [ -f "fuzz/fuzz_targets/$t.rs" ] || { echo "fuzz.sh: no target $t" >&2; exit 2; }
done

if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --version 0.13.2 --locked
fi
# The default toolchain, whichever it is: another one would build the whole tree again.
if ! rustc --version | grep -q nightly; then
    export RUSTC_BOOTSTRAP=1
fi
fuzz=(cargo fuzz)
# Release builds with debug assertions and overflow checks (cargo-fuzz's default).
"${fuzz[@]}" build --sanitizer "$sanitizer"

work=fuzz/target/campaign
mkdir -p "$work"
run_one() {
    local t="$1"
    local corpus="$work/corpus/$t" artifacts="fuzz/artifacts/$t"
    mkdir -p "$corpus" "$artifacts"
    local before
    before="$(find "$corpus" -type f | wc -l)"
    local start=$SECONDS
    # -timeout: one input running longer is a hang; -rss_limit_mb bounds memory (and with
    # it, single allocations): exceeding either is reported as a crash.
    local seeds=("fuzz/corpus/$t")
    # The bundled repositories' Python files seed the mutation engine's target (read, not
    # copied into fuzz/corpus).
    if [ "$t" = python_source ]; then seeds+=(examples/repos); fi
    "${fuzz[@]}" run --sanitizer "$sanitizer" "$t" "$corpus" "${seeds[@]}" -- \
        -max_total_time="$seconds" -timeout=60 -rss_limit_mb=4096 -max_len=65536 \
        -print_final_stats=1 -artifact_prefix="$artifacts/" >"$work/$t.log" 2>&1 || true
    local wall=$((SECONDS - start))
    local execs
    execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t.log" | tail -1)"
    local crashes
    crashes="$(find "$artifacts" -type f -newer "$work/$t.started" 2>/dev/null | wc -l)"
    local after
    after="$(find "$corpus" -type f | wc -l)"
    echo "| $t | ${execs:-0} | $wall | $((after - before)) | $crashes |" >"$work/$t.row"
}
rows=()
running=0
for t in "${targets[@]}"; do
    touch "$work/$t.started"
    echo "fuzzing $t for ${seconds}s (log: $work/$t.log)"
    run_one "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$parallel" ]; then
        wait -n || true
        running=$((running - 1))
    fi
done
wait

report=fuzz/target/fuzz-report.md
{
    echo "| target | executions | seconds | new inputs | crashes |"
    echo "|---|---:|---:|---:|---:|"
    for t in "${targets[@]}"; do cat "$work/$t.row"; done
} | tee "$report"
if [ "$merge" = 1 ]; then
    for t in "${targets[@]}"; do
        "${fuzz[@]}" run --sanitizer "$sanitizer" "$t" "fuzz/corpus/$t" "$work/corpus/$t" -- \
            -merge=1 -max_len=65536 >"$work/$t.merge.log" 2>&1
    done
    echo "merged the inputs that add coverage into fuzz/corpus/"
fi
crashed=0
for t in "${targets[@]}"; do
    if [ "$(cut -d'|' -f6 "$work/$t.row" | tr -d ' ')" != 0 ]; then
        echo "$t crashed: see fuzz/artifacts/$t/ and $work/$t.log" >&2
        crashed=1
    fi
done
exit "$crashed"
