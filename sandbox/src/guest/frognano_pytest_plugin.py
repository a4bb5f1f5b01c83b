"""FrogNano's pytest plugin: one JSON line per finished test, written as it finishes.

Results go to a file rather than stdout so that a run cut short by a limit still reports
every test that completed before it.
"""

import json
import os

import pytest

_out = None
_pending = {}
_MESSAGE_LINES = 25
_MESSAGE_CHARS = 2000


def _missing(module):
    import importlib.util

    try:
        return importlib.util.find_spec(module) is None
    except Exception:
        return True


def pytest_addoption(parser):
    """Accept (and ignore) the options of plugins that cannot run in the sandbox, so that a
    repository whose `addopts` names them still runs its tests."""
    group = parser.getgroup("frognano", "options accepted and ignored in the FrogNano sandbox")
    if _missing("pytest_cov"):
        group.addoption("--cov", action="append", nargs="?", const=True, default=[], dest="frognano_cov")
        for flag in ("--cov-report", "--cov-config", "--cov-fail-under", "--cov-context"):
            group.addoption(flag, action="append", default=[], dest="frognano_" + flag[2:].replace("-", "_"))
        for flag in ("--no-cov", "--no-cov-on-fail", "--cov-append", "--cov-branch"):
            group.addoption(flag, action="store_true", dest="frognano_" + flag[2:].replace("-", "_"))
    if _missing("xdist"):
        # pytest reserves lowercase short options for itself; xdist registers `-n` the same way.
        group._addoption("-n", "--numprocesses", dest="frognano_numprocesses")
        group.addoption("--dist", dest="frognano_dist")
        group.addoption("--maxprocesses", dest="frognano_maxprocesses")
    if _missing("pytest_timeout"):
        group.addoption("--timeout", dest="frognano_timeout")
        parser.addini("timeout", "ignored in the sandbox")


def configure(path, coverage_root=None):
    global _out
    _pending.clear()
    _out = open(path, "a", encoding="utf-8")
    if coverage_root:
        _Coverage.start(coverage_root)


class _Coverage:
    """Per-test line coverage of the files under one directory, with `sys.monitoring`.

    Each code location reports its first execution per bucket and is then disabled until the
    next bucket starts, so the cost is one callback per executed line per test. Lines run by
    a test's call phase belong to that test; everything else (imports, collection, fixture
    setup and teardown, whose results tests may share) goes to the shared bucket.
    """

    active = None

    def __init__(self, root, monitoring, tool):
        self.prefix = root.rstrip("/") + "/"
        self.monitoring = monitoring
        self.tool = tool
        self.shared = {}
        self.current = self.shared

    @classmethod
    def start(cls, root):
        import sys

        monitoring = getattr(sys, "monitoring", None)
        if monitoring is None:
            _write({"coverage_unavailable": "this interpreter has no sys.monitoring"})
            return
        for tool in (monitoring.COVERAGE_ID, 2, 3, 4):
            try:
                monitoring.use_tool_id(tool, "frognano")
                break
            except ValueError:
                continue
        else:
            _write({"coverage_unavailable": "no free sys.monitoring tool id"})
            return
        cov = cls(root, monitoring, tool)
        monitoring.register_callback(tool, monitoring.events.LINE, cov.on_line)
        monitoring.set_events(tool, monitoring.events.LINE)
        cls.active = cov

    def on_line(self, code, line):
        name = code.co_filename
        if name.startswith(self.prefix):
            lines = self.current.get(name)
            if lines is None:
                lines = self.current[name] = set()
            lines.add(line)
        return self.monitoring.DISABLE

    def switch(self, bucket):
        self.current = bucket
        self.monitoring.restart_events()

    def files(self, bucket):
        cut = len(self.prefix)
        return {name[cut:]: sorted(lines) for name, lines in bucket.items()}

    def stop(self):
        self.monitoring.set_events(self.tool, 0)
        self.monitoring.free_tool_id(self.tool)
        _write({"coverage": None, "files": self.files(self.shared)})


def _coverage_call_start():
    if _Coverage.active is not None:
        _Coverage.active.switch({})


def _coverage_call_end(nodeid):
    cov = _Coverage.active
    if cov is not None and cov.current is not cov.shared:
        _write({"coverage": nodeid, "files": cov.files(cov.current)})
        cov.switch(cov.shared)


def _write(record):
    if _out is None:
        return
    _out.write(json.dumps(record) + "\n")
    _out.flush()


def _message(report):
    try:
        text = report.longreprtext
    except Exception:
        text = str(getattr(report, "longrepr", ""))
    lines = text.strip().splitlines()[-_MESSAGE_LINES:]
    return "\n".join(lines)[-_MESSAGE_CHARS:]


def pytest_runtest_logreport(report):
    state = _pending.setdefault(report.nodeid, {"duration": 0.0, "outcome": None, "message": None})
    state["duration"] += float(getattr(report, "duration", 0.0) or 0.0)
    xfail = hasattr(report, "wasxfail")
    if report.when == "setup":
        if report.failed:
            state["outcome"], state["message"] = "error", _message(report)
        elif report.skipped:
            state["outcome"] = "xfailed" if xfail else "skipped"
    elif report.when == "call":
        if xfail and report.skipped:
            state["outcome"] = "xfailed"
        elif xfail and report.passed:
            state["outcome"] = "xpassed"
        elif report.failed:
            state["outcome"], state["message"] = "failed", _message(report)
        elif report.skipped:
            state["outcome"] = "skipped"
        else:
            state["outcome"] = "passed"
    elif report.when == "teardown":
        if report.failed and state["outcome"] in (None, "passed", "skipped", "xfailed", "xpassed"):
            state["outcome"], state["message"] = "error", _message(report)
        _pending.pop(report.nodeid, None)
        record = {
            "id": report.nodeid,
            "outcome": state["outcome"] or "error",
            "duration_s": round(state["duration"], 6),
        }
        if state["message"]:
            record["message"] = state["message"]
        _write(record)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    _coverage_call_start()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    _coverage_call_end(item.nodeid)


def pytest_collectreport(report):
    if report.failed:
        _write({"id": report.nodeid or "<collection>", "outcome": "error", "duration_s": 0.0,
                "message": _message(report)})


def finish(exit_code):
    global _out
    if _Coverage.active is not None:
        _Coverage.active.stop()
        _Coverage.active = None
    if _out is not None:
        _write({"exit_code": int(exit_code)})
        _out.close()
        _out = None


# Outside the sandbox (e.g. a native run for comparison), load with `-p` and name the
# results file in FROGNANO_RESULTS.
def pytest_configure(config):
    path = os.environ.get("FROGNANO_RESULTS")
    if _out is None and path:
        configure(path)


def pytest_unconfigure(config):
    if os.environ.get("FROGNANO_RESULTS"):
        finish(getattr(config, "_frognano_exit", 0))


def pytest_sessionfinish(session, exitstatus):
    session.config._frognano_exit = int(exitstatus)
