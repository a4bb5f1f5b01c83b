# Section timing for the test scripts: `section LABEL [DESCRIPTION]` starts a section (closing
# the one before) and prints its heading with the seconds since the script started;
# `section_table` prints every section's seconds, then the total. Background work records its
# own seconds with `background_record LABEL SECONDS`; it is listed apart, since it overlaps the
# sections. Sourced by scripts/test.sh.
section_labels=()
section_seconds=()
section_current=""
section_started=0
background_labels=()
background_seconds=()

section_end() {
    if [ -n "$section_current" ]; then
        section_labels+=("$section_current")
        section_seconds+=("$((SECONDS - section_started))")
        section_current=""
    fi
}

section() {
    section_end
    section_current="$1"
    section_started=$SECONDS
    echo "== $* [${SECONDS} s]"
}

background_record() {
    background_labels+=("$1")
    background_seconds+=("$2")
}

# section_table [STATUS]: the table, with the outcome when STATUS is not 0.
section_table() {
    local status=${1:-0} i
    section_end
    echo
    echo "| section | seconds |"
    echo "|---|---:|"
    for i in "${!section_labels[@]}"; do
        echo "| ${section_labels[$i]} | ${section_seconds[$i]} |"
    done
    for i in "${!background_labels[@]}"; do
        echo "| (in the background) ${background_labels[$i]} | ${background_seconds[$i]} |"
    done
    if [ "$status" -eq 0 ]; then
        echo "| **total** | **${SECONDS}** |"
    else
        echo "| **total (failed, exit status $status)** | **${SECONDS}** |"
    fi
}
