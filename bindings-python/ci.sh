#!/usr/bin/env bash
# Builds the wheel, installs it into a fresh virtualenv and runs the Python tests against the
# installed package (not the source tree; one test also drives the CLI and the C library
# built under target/), checks the type stubs against the installed module
# with mypy's stubtest, then runs the Python examples.
set -euo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
maturin build -q -m bindings-python/Cargo.toml -o "$work/dist"
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --disable-pip-version-check "$work"/dist/frognano-*.whl pytest
# The stubs (frognano/_frognano.pyi) must describe the native module as it is.
"$work/venv/bin/python" -m pip install -q --disable-pip-version-check "mypy==2.4.1"
(cd "$work" && "$work/venv/bin/python" -m mypy.stubtest frognano._frognano)
# tests/test_surfaces.py runs one evaluation through the CLI and the C library too (built by
# `cargo build --workspace`) and compares the three reports.
target="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)"
export FROGNANO_CLI="$target/debug/frognano" FROGNANO_C_LIBRARY="$target/debug/libfrognano.so"
(cd bindings-python && "$work/venv/bin/python" -m pytest tests -q -p no:cacheprovider)
"$work/venv/bin/python" examples/python/run_tests.py | tail -1
"$work/venv/bin/python" examples/python/agent_loop.py | tail -2
"$work/venv/bin/python" examples/python/synth_tasks.py | tail -2
"$work/venv/bin/python" examples/python/train_policy.py | tail -1
"$work/venv/bin/python" examples/python/local_model.py | tail -3
