# require COMMAND PACKAGE: installs the Debian package when the command is missing (a no-op
# when present; apt-get with sudo when not root). Sourced by scripts/test.sh and bindings-c/ci.sh.
require() {
    local command=$1 package=$2
    command -v "$command" >/dev/null 2>&1 && return 0
    local sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    if command -v apt-get >/dev/null 2>&1; then
        "${sudo[@]}" apt-get update -qq
        DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "$package"
    fi
    command -v "$command" >/dev/null 2>&1 || { echo "$command is required" >&2; exit 1; }
}
