#!/usr/bin/env bash
# The fast path: format check and the pure unit tests (every crate's own tests, the trainer on
# scripted environments, the C header check), with no runtime setup and no sandboxed run.
# About half a minute once `target/` is built; `bash scripts/test.sh` runs everything.
set -euo pipefail
cd "$(dirname "$0")/.."

# An empty cache of its own: a test that needed the runtime would fail here instead of
# fetching it, and the check at the end proves none did.
cache="$(mktemp -d)"
trap 'rm -rf "$cache"' EXIT
export FROGNANO_CACHE="$cache"

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== unit tests"
cargo test --workspace --lib --bins
cargo test -p frognano-train --test scripted
cargo test -p frognano-c --test header
if [ -n "$(ls -A "$cache")" ]; then
    echo "the fast tests touched the runtime cache: $(ls "$cache")" >&2
    exit 1
fi
echo "fast tests passed"
