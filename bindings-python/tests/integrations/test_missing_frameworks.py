"""Importing an adapter whose framework is not installed raises an ImportError that names the
extra to install (checked in a child interpreter where the framework's import is blocked)."""

import subprocess
import sys

import pytest

from frognano.integrations import TESTED_VERSIONS

BLOCKED_IMPORT = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == {module!r} or name.startswith({module!r} + "."):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Block())
try:
    import frognano.integrations.{extra}
except ImportError as error:
    print(error)
    sys.exit(3)
"""

FRAMEWORK_MODULES = {"gymnasium": "gymnasium", "trl": "trl", "verl": "verl", "skyrl": "skyrl_gym",
                     "verifiers": "verifiers", "openrlhf": "openrlhf", "openenv": "openenv", "gem": "gem"}


@pytest.mark.parametrize("extra", sorted(FRAMEWORK_MODULES))
def test_missing_framework_names_the_extra(extra):
    script = BLOCKED_IMPORT.format(module=FRAMEWORK_MODULES[extra], extra=extra)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stdout + done.stderr
    distribution, version = TESTED_VERSIONS[extra]
    assert f"pip install 'frognano[{extra}]'" in done.stdout
    assert f"{distribution} (tested with {version})" in done.stdout


def test_the_shared_parts_need_no_framework():
    script = BLOCKED_IMPORT.format(module="gymnasium", extra="curriculum")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
