#!/usr/bin/env bash
# Installs the trainer frameworks of the integration tests (requirements.txt beside this file:
# pinned, hash-checked, --no-deps) into a cached virtualenv layered on the learner environment
# given as $1 (its packages are visible through a .pth file), once per requirements file and
# learner; prints the environment's folder. Idempotent: a finished environment is reused.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
learner_env="${1:?usage: setup-env.sh LEARNER_ENV}"
lock="$here/requirements.txt"
key="$( (sha256sum "$lock" | cut -c1-16; echo "$learner_env") | sha256sum | cut -c1-12)"
cache="${FROGNANO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/frognano}/integrations"
env_dir="$cache/env-$key"
if [ ! -f "$env_dir/.complete" ]; then
  mkdir -p "$cache"
  partial="$cache/.partial-$key-$$"
  rm -rf "$partial"
  trap 'rm -rf "$partial"' EXIT
  python3 -m venv "$partial" >&2
  learner_site="$("$learner_env/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  site="$("$partial/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$learner_site" > "$site/frognano-learner-env.pth"
  "$partial/bin/python" -m pip install -q --disable-pip-version-check --no-deps --require-hashes -r "$lock" >&2
  # The venv is relocated by renaming: its scripts' shebangs name the partial path, so the
  # tests call `python -m`, never the scripts.
  "$partial/bin/python" -c 'import gymnasium, trl, skyrl_gym, verifiers.v1.tasksets, openrlhf.utils.agent, verl.experimental.agent_loop.agent_loop, openenv.core, fastmcp.client, gem, transfer_queue' >&2
  rm -rf "$env_dir"
  mv "$partial" "$env_dir"
  trap - EXIT
  touch "$env_dir/.complete"
fi
echo "$env_dir"
