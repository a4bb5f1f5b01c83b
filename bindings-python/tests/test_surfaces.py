"""One evaluation through all three surfaces: the `frognano eval --json` command, this
package's `evaluate` and the C library's `frognano_evaluate` return the same report."""

import ctypes
import json
import os
import pathlib
import subprocess

import pytest

import frognano

ROOT = pathlib.Path(__file__).resolve().parents[2]
# Fields that measure the machine rather than the episodes.
TIMINGS = {"steps_per_s", "wall_s", "mean_reset_ms"}


def _built(variable, relative):
    path = pathlib.Path(os.environ.get(variable) or ROOT / relative)
    if not path.exists():
        pytest.fail(f"{path} is not built (cargo build --workspace), or set {variable}")
    return path


class _C:
    """The few C functions an evaluation needs, through ctypes."""

    def __init__(self, path):
        lib = ctypes.CDLL(str(path))
        p = ctypes.c_void_p
        lib.frognano_error_message.argtypes = [p]
        lib.frognano_error_message.restype = ctypes.c_char_p
        lib.frognano_error_free.argtypes = [p]
        lib.frognano_sandbox_new.argtypes = [ctypes.c_char_p, ctypes.POINTER(p)]
        lib.frognano_sandbox_new.restype = p
        lib.frognano_sandbox_free.argtypes = [p]
        lib.frognano_tasks_load.argtypes = [ctypes.c_char_p, ctypes.POINTER(p)]
        lib.frognano_tasks_load.restype = p
        lib.frognano_task_set_free.argtypes = [p]
        lib.frognano_evaluate.argtypes = [p, p, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(p)]
        lib.frognano_evaluate.restype = p
        lib.frognano_string_free.argtypes = [p]
        self.lib = lib

    def check(self, error):
        if error:
            message = self.lib.frognano_error_message(error).decode()
            self.lib.frognano_error_free(error)
            raise AssertionError(message)

    def evaluate(self, tasks_path, policy):
        lib, p = self.lib, ctypes.c_void_p
        sandbox, tasks, out = p(), p(), p()
        self.check(lib.frognano_sandbox_new(None, ctypes.byref(sandbox)))
        try:
            self.check(lib.frognano_tasks_load(str(tasks_path).encode(), ctypes.byref(tasks)))
            try:
                self.check(lib.frognano_evaluate(sandbox, tasks, policy.encode(), 1, ctypes.byref(out)))
                try:
                    return json.loads(ctypes.string_at(out.value).decode())
                finally:
                    lib.frognano_string_free(out)
            finally:
                lib.frognano_task_set_free(tasks)
        finally:
            lib.frognano_sandbox_free(sandbox)


def _episodes(report):
    return {k: v for k, v in report.items() if k not in TIMINGS}


@pytest.mark.parametrize("policy", ["oracle", "noop"])
def test_cli_python_and_c_report_the_same_evaluation(tmp_path, policy):
    tasks = frognano.load_tasks(ROOT / "examples" / "tasks" / "sample.jsonl")[:3]
    broken = dict(tasks[0], id="missing-repository")
    broken["repo"] = {"kind": "path", "path": str(tmp_path / "no-such-repository")}
    tasks_path = tmp_path / "tasks.jsonl"
    frognano.save_tasks(tasks_path, tasks + [broken])

    cli = subprocess.run(
        [str(_built("FROGNANO_CLI", "target/debug/frognano")), "eval", "--tasks", str(tasks_path),
         "--policy", policy, "--workers", "1", "--json"],
        capture_output=True, text=True, timeout=600,
    )
    # Exit status 1: a task could not be reset.
    assert cli.returncode == 1, cli.stderr
    from_cli = json.loads(cli.stdout.strip().splitlines()[-1])
    from_python, _records = frognano.evaluate(frognano.load_tasks(tasks_path), policy, workers=1)
    from_c = _C(_built("FROGNANO_C_LIBRARY", "target/debug/libfrognano.so")).evaluate(tasks_path, policy)

    assert set(from_cli) == set(from_python) == set(from_c)
    assert _episodes(from_cli) == _episodes(from_python) == _episodes(from_c)
    assert from_python["episodes"] == 3
    assert [f["task_id"] for f in from_python["failed_tasks"]] == ["missing-repository"]
    assert from_python["resolved"] == (3 if policy == "oracle" else 0)
