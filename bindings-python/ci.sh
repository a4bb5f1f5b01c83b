#!/usr/bin/env bash
# Builds the wheel, installs it into a fresh virtualenv and runs the Python tests against the
# installed package (not the source tree; one test also drives the CLI and the C library
# built under target/), checks the type stubs against the installed module
# with mypy's stubtest, then runs the Python examples.
set -euo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# The dev profile (dependencies optimised, Cargo.toml) reuses what `cargo build --workspace
# --all-targets` compiled instead of building every dependency again in release. For that the
# package's dependencies must resolve to the same features as in the workspace's build: the
# feature pins of bindings-python/Cargo.toml, and the test-support features that the
# workspace's test targets turn on (dead code in the wheel). A drift only costs compile time:
# it is reported, not fatal.
wheel_features=frognano-sandbox/testing,frognano-env/testing
resolved_features() { cargo tree --offline -e normal,build -f '{p}|{f}' --prefix none "$@" 2>/dev/null | sed 's/ (\*)$//' | sort -u; }
build_wheel() {
  local drift
  drift="$(comm -13 <(resolved_features --workspace -e dev) <(resolved_features -p frognano-python --features "$wheel_features") || true)"
  if [ -n "$drift" ]; then
    echo "warning: the wheel's build resolves these dependencies with other features than the workspace (pin them in bindings-python/Cargo.toml):" >&2
    echo "$drift" >&2
  fi
  maturin build -q --profile dev -m bindings-python/Cargo.toml --features "$wheel_features" -o "$1"
}
# `ci.sh --build-wheel DIR` only builds the wheel into DIR (scripts/test.sh builds it before the
# test lanes start, so that no cargo command runs beside the other lane's `cargo test`); with
# FROGNANO_WHEEL_DIR set, the wheel found there is tested instead of building one.
if [ "${1:-}" = --build-wheel ]; then
  build_wheel "${2:?usage: ci.sh --build-wheel DIR}"
  exit 0
fi
dist="${FROGNANO_WHEEL_DIR:-$work/dist}"
[ -n "${FROGNANO_WHEEL_DIR:-}" ] || build_wheel "$dist"
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --disable-pip-version-check "$dist"/frognano-*.whl pytest
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
"$work/venv/bin/python" examples/python/train_policy.py --iterations 1 | tail -1
"$work/venv/bin/python" examples/python/local_model.py | tail -3
# The cluster example needs Ray (the integrations environment has it).
if [ -n "${FROGNANO_INTEGRATIONS_ENV:-}" ] || "$work/venv/bin/python" -c "import ray" 2>/dev/null; then
  "$work/venv/bin/python" examples/python/cluster_eval.py local | tail -1
fi
