"""`frognano serve` for the tests that talk to a served model (test_served.py and the
verifiers integration): the CLI started on a free loopback port, waited for, then stopped."""

import contextlib
import os
import pathlib
import socket
import subprocess
import time
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli_path():
    """The CLI: FROGNANO_CLI, else the workspace's debug build; None when it is not built."""
    cli = pathlib.Path(os.environ.get("FROGNANO_CLI") or ROOT / "target" / "debug" / "frognano")
    return cli if cli.exists() else None


def wait_until_up(process, url, what, wait_s):
    """Polls `url` until it answers; fails the test (with the process's output) when `process`
    exits first or `wait_s` seconds pass."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"{what} did not come up: {process.stdout.read()}")
            time.sleep(0.2)


@contextlib.contextmanager
def frognano_serve(cli, model, *, name="tiny", threads=1, wait_s=60):
    """Serves `model` as `name`; yields the /v1 URL. A graceful stop (SIGTERM) must exit 0."""
    port = free_port()
    process = subprocess.Popen(
        [str(cli), "serve", "--model", str(model), "--port", str(port), "--served-model-name", name,
         "--threads", str(threads)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}/v1"
    wait_until_up(process, url + "/models", "frognano serve", wait_s)
    try:
        yield url
    finally:
        process.terminate()
        code = process.wait(timeout=30)
    assert code == 0, f"frognano serve exited {code} on SIGTERM"
