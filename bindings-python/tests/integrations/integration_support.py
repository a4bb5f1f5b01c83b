"""Helpers of the trainer-integration tests. Each test module imports its framework with
`framework("trl")`: the real installed package at its tested version. Where the frameworks are
not installed the module is skipped, unless FROGNANO_REQUIRE_INTEGRATIONS=1 (the test script
sets it, having installed them), where that is a failure."""

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from frognano.integrations import TESTED_VERSIONS

ROOT = Path(__file__).resolve().parents[3]
# The helpers of the package's other tests (serving.py) are importable from here too.
if str(Path(__file__).resolve().parents[1]) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parents[1]))
TASKS = ROOT / "examples" / "tasks" / "sample.jsonl"
EXAMPLES = ROOT / "examples" / "python" / "integrations"
REQUIRED = os.environ.get("FROGNANO_REQUIRE_INTEGRATIONS") == "1"


def framework(extra, module=None):
    """Imports the framework behind frognano.integrations.<extra> and checks its version."""
    from importlib.metadata import version

    distribution, pinned = TESTED_VERSIONS[extra]
    try:
        imported = importlib.import_module(module or extra)
    except ImportError as error:
        if REQUIRED:
            raise
        pytest.skip(f"{distribution} is not installed ({error})", allow_module_level=True)
    assert version(distribution) == pinned, f"{distribution} {version(distribution)} is not the tested {pinned}"
    return imported


def run_example(name, *args, timeout=600):
    """Runs examples/python/integrations/<name> with this interpreter; returns its stdout."""
    done = subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)
    assert done.returncode == 0, f"{name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


class RecordingSource:
    """A task source for TaskSampler that keeps the outcomes it is fed back."""

    def __init__(self, tasks):
        self.tasks = list(tasks)
        self.outcomes = []

    def propose(self, n):
        return self.tasks[:n]

    def feedback(self, outcomes):
        self.outcomes.extend(outcomes)
