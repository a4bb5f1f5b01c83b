import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import frognano

REPOS = Path(__file__).resolve().parents[2] / "examples" / "repos"


@pytest.fixture(scope="session")
def sandbox():
    return frognano.Sandbox()


@pytest.fixture
def make_repo(tmp_path):
    """Writes {relative path: source} into a fresh directory and returns it."""

    def make(files):
        for name, source in files.items():
            path = tmp_path / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(source))
        return tmp_path

    return make


@pytest.fixture
def sample_repo():
    return REPOS / "textkit"


CTRL_C_SCRIPT = textwrap.dedent(
    """
    import sys, time, frognano
    {setup}
    print("ready", flush=True)
    started = time.time()
    try:
        {call}
    except KeyboardInterrupt:
        print("interrupted after %.1f s" % (time.time() - started), flush=True)
        sys.exit(42)
    """
)


@pytest.fixture
def ctrl_c():
    """Runs `setup` then `call` in a child Python, sends it SIGINT `after` seconds past setup
    and asserts that the call was interrupted (the child may take `timeout` seconds to exit)."""

    def run(setup, call, after, timeout):
        script = CTRL_C_SCRIPT.format(setup=setup, call=call)
        child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "ready"
        time.sleep(after)
        child.send_signal(signal.SIGINT)
        try:
            code = child.wait(timeout=timeout)
        finally:
            child.kill()
        assert code == 42
        assert "interrupted" in child.stdout.read()

    return run


@pytest.fixture(autouse=True)
def default_sigint_handler():
    """Gives every test Python's own SIGINT handler: some frameworks the integration tests drive
    (in-process Ray drivers, servers) install or ignore SIGINT, also from fixtures of wider
    scope, and the Ctrl-C tests, and every child process started after, inherit what this
    process has."""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield


def pytest_report_header(config):
    return "frognano %s from %s" % (frognano.__version__, os.path.dirname(frognano.__file__))
