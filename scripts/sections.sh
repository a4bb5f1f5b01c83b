# Section timing for the test scripts: `section LABEL` starts a section (closing the one
# before) and prints its heading with the seconds since the script started; `section_table`
# prints every section's wall-clock seconds and the CPU seconds its processes used (user +
# system, of every process the section waited for), then the total. CPU seconds over wall
# seconds is how many of the machine's cores the section kept busy. Background work records its
# own seconds with `background_record LABEL SECONDS [CPU_SECONDS]`; it is listed apart, since it
# overlaps the sections. Sourced by scripts/test.sh.
section_labels=()
section_seconds=()
section_cpu=()
section_current=""
section_started=0
section_cpu_started=0
background_labels=()
background_seconds=()
background_cpu=()

# cpu_seconds VAR: sets VAR to the user + system CPU seconds of this shell's waited-for children
# so far (the second line of `times`, e.g. "1m2.340s 0m5.120s"). `times` runs in this shell, not
# in a command substitution's subshell, whose children are not these.
section_times_file="$(mktemp)"
cpu_seconds() {
    times >"$section_times_file"
    printf -v "$1" '%s' "$(tail -1 "$section_times_file" | awk '{ total = 0
        for (i = 1; i <= 2; i++) { split($i, part, "m"); sub("s", "", part[2]); total += part[1] * 60 + part[2] }
        printf "%d\n", total }')"
}

section_end() {
    if [ -n "$section_current" ]; then
        section_labels+=("$section_current")
        section_seconds+=("$((SECONDS - section_started))")
        local cpu_now
        cpu_seconds cpu_now
        section_cpu+=("$((cpu_now - section_cpu_started))")
        section_current=""
    fi
}

# The free space on the disk the run builds on, for the section headings: a run that fills the
# disk fails in whichever step writes next, and the headings show where the space went.
disk_free() {
    df -Pk . 2>/dev/null | awk 'NR == 2 { printf ", %.1f GiB free", $4 / 1048576 }'
}

section() {
    section_end
    section_current="$1"
    section_started=$SECONDS
    cpu_seconds section_cpu_started
    echo "== $* [${SECONDS} s$(disk_free)]"
}

background_record() {
    background_labels+=("$1")
    background_seconds+=("$2")
    background_cpu+=("${3:-}")
}

# section_rows [PREFIX]: one table row per finished section, labels prefixed with PREFIX.
section_rows() {
    local prefix=${1:-} i
    section_end
    for i in "${!section_labels[@]}"; do
        echo "| ${prefix}${section_labels[$i]} | ${section_seconds[$i]} | ${section_cpu[$i]} |"
    done
}

# section_table [STATUS]: the table, with the outcome when STATUS is not 0. Rows written by
# work that ran beside the sections (files named in section_extra_rows) follow their own.
section_extra_rows=()
section_table() {
    local status=${1:-0} i cpu_total file
    section_end
    cpu_seconds cpu_total
    echo
    echo "| section | seconds | CPU seconds |"
    echo "|---|---:|---:|"
    section_rows
    for file in "${section_extra_rows[@]}"; do
        [ -f "$file" ] && cat "$file"
    done
    for i in "${!background_labels[@]}"; do
        echo "| (in the background) ${background_labels[$i]} | ${background_seconds[$i]} | ${background_cpu[$i]} |"
    done
    if [ "$status" -eq 0 ]; then
        echo "| **total** | **${SECONDS}** | **${cpu_total}** |"
    else
        echo "| **total (failed, exit status $status)** | **${SECONDS}** | **${cpu_total}** |"
    fi
}
