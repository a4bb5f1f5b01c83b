#!/usr/bin/env bash
# Builds the wheel, installs it into a fresh virtualenv and runs the Python tests against the
# installed package (not the source tree; one test also drives the CLI and the C library
# built under target/), checks the type stubs against the installed module
# with mypy's stubtest, then runs the Python examples.
set -euo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# The dev profile (dependencies optimised, Cargo.toml) reuses what `cargo build --workspace`
# compiled instead of building every dependency again in release.
maturin build -q --profile dev -m bindings-python/Cargo.toml -o "$work/dist"
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --disable-pip-version-check "$work"/dist/frognano-*.whl pytest
# With the learner environment given (FROGNANO_LEARNER_ENV), its packages (torch, transformers,
# numpy, ...: the frognano[torch] extra) are visible to this venv through a .pth file instead of
# being installed again, so the language-model tests run against the installed package.
if [ -n "${FROGNANO_LEARNER_ENV:-}" ]; then
  learner_site="$("$FROGNANO_LEARNER_ENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  venv_site="$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$learner_site" > "$venv_site/frognano-learner-env.pth"
else
  "$work/venv/bin/python" -m pip install -q --disable-pip-version-check numpy
fi
# With the integrations environment given (FROGNANO_INTEGRATIONS_ENV: the trainer frameworks at
# their tested versions, integrations/setup-env.sh), its packages are visible the same way, ahead
# of the learner's, and the integration tests must run (a missing framework fails them).
if [ -n "${FROGNANO_INTEGRATIONS_ENV:-}" ]; then
  integrations_site="$("$FROGNANO_INTEGRATIONS_ENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  venv_site="$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$integrations_site" > "$venv_site/frognano-integrations-env.pth"
  export FROGNANO_REQUIRE_INTEGRATIONS=1
fi
# The stubs (frognano/_frognano.pyi) must describe the native module as it is.
"$work/venv/bin/python" -m pip install -q --disable-pip-version-check "mypy==2.4.1"
(cd "$work" && "$work/venv/bin/python" -m mypy.stubtest frognano._frognano)
# tests/test_surfaces.py runs one evaluation through the CLI and the C library too (built by
# `cargo build --workspace`) and compares the three reports.
target="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)"
export FROGNANO_CLI="$target/debug/frognano" FROGNANO_C_LIBRARY="$target/debug/libfrognano.so"
# tests/learner runs on its own in the learner environment (scripts/test.sh); tests/integrations
# (the trainer adapters, each against its real framework) runs here, and runs their examples.
(cd bindings-python && "$work/venv/bin/python" -m pytest tests -q -p no:cacheprovider --ignore=tests/learner --durations=25)
"$work/venv/bin/python" examples/python/run_tests.py | tail -1
"$work/venv/bin/python" examples/python/agent_loop.py | tail -2
"$work/venv/bin/python" examples/python/synth_tasks.py | tail -2
"$work/venv/bin/python" examples/python/train_policy.py | tail -1
"$work/venv/bin/python" examples/python/local_model.py | tail -3
# The cluster example needs Ray (the integrations environment has it).
if [ -n "${FROGNANO_INTEGRATIONS_ENV:-}" ] || "$work/venv/bin/python" -c "import ray" 2>/dev/null; then
  "$work/venv/bin/python" examples/python/cluster_eval.py local | tail -1
fi
