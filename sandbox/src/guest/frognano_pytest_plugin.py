"""FrogNano's pytest plugin: one JSON line per finished test, written as it finishes.

Results go to a file rather than stdout so that a run cut short by a limit still reports
every test that completed before it. The last line profiles the session: the guest's clock at
the start of the run, of pytest's session, at the end of collection and around the run loop.

A run that is one shard of a suite split over several sandbox instances (`configure(...,
shard=(index, count))`) keeps every `count`-th collected test from `index` on and writes each
test's position in the whole collection, so that the host can merge the shards in order.

A failed or errored test whose exception shows a feature WebAssembly (WASI) lacks gets a
`"platform"` key naming the missing feature (see `_platform_label`). Where the interpreter
cannot duplicate file descriptors, `capfd`/`capfdbinary` capture at the `sys` level and
`--capture=fd` becomes `--capture=sys`, so fd-level capture cannot break later tests.
"""

import errno
import json
import os
import re
import sys
import time

import pytest

_out = None
_pending = {}
_collect_platform = {}
_clock = time.perf_counter
_marks = {}
_shard = None
_positions = {}
_MESSAGE_LINES = 25
_MESSAGE_CHARS = 2000


def _missing(module):
    import importlib.util

    try:
        return importlib.util.find_spec(module) is None
    except Exception:
        return True


# pytest-benchmark's options: flags, options with a value, options with an optional value.
_BENCHMARK_FLAGS = ("disable-gc", "skip", "disable", "enable", "only", "autosave", "save-data",
                    "verbose", "quiet")
_BENCHMARK_VALUES = ("min-time", "max-time", "min-rounds", "timer", "calibration-precision",
                     "warmup-iterations", "save", "json", "storage", "sort", "group-by", "columns",
                     "name", "time-unit", "cprofile", "cprofile-loops", "cprofile-top")
_BENCHMARK_OPTIONAL = ("warmup", "compare", "histogram", "cprofile-dump", "compare-fail")
_LINT_FLAGS = (("pytest_ruff", ("--ruff", "--ruff-format")), ("pytest_mypy", ("--mypy",)),
               ("pytest_black", ("--black",)), ("pytest_flake8", ("--flake8",)),
               ("pytest_isort", ("--isort",)), ("pytest_pylint", ("--pylint",)))
# The cache plugin's options (the plugin is disabled: nothing survives a sandboxed run).
_CACHE_FLAGS = (("--lf", "--last-failed"), ("--ff", "--failed-first"), ("--nf", "--new-first"),
                ("--cache-clear",), ("--sw", "--stepwise"), ("--sw-skip", "--stepwise-skip"),
                ("--sw-reset", "--stepwise-reset"))


def pytest_addoption(parser, pluginmanager):
    """Accept (and ignore) the options of plugins that cannot run in the sandbox, so that a
    repository whose `addopts` names them still runs its tests."""
    group = parser.getgroup("frognano", "options accepted and ignored in the FrogNano sandbox")
    if pluginmanager.is_blocked("cacheprovider"):
        for flags in _CACHE_FLAGS:
            group.addoption(*flags, action="store_true", dest="frognano_" + flags[-1][2:].replace("-", "_"))
        group.addoption("--cache-show", nargs="?", const="*", dest="frognano_cache_show")
        group.addoption("--lfnf", "--last-failed-no-failures", dest="frognano_lfnf")
    # Lint plugins left out of test requirements: their switches are accepted and do nothing.
    for module, flags in _LINT_FLAGS:
        if _missing(module):
            for flag in flags:
                group.addoption(flag, action="store_true", dest="frognano_" + flag[2:].replace("-", "_"))
    if _missing("pytest_benchmark"):
        for name in _BENCHMARK_FLAGS:
            group.addoption("--benchmark-" + name, action="store_true", dest="frognano_benchmark_" + name.replace("-", "_"))
        for name in _BENCHMARK_VALUES:
            group.addoption("--benchmark-" + name, dest="frognano_benchmark_" + name.replace("-", "_"))
        for name in _BENCHMARK_OPTIONAL:
            group.addoption("--benchmark-" + name, nargs="?", const=True, dest="frognano_benchmark_" + name.replace("-", "_"))
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
        group.addoption("--timeout-method", "--timeout_method", dest="frognano_timeout_method")
        group.addoption("--session-timeout", dest="frognano_session_timeout")
    for module, _names, ini_keys, _markers in _ABSENT_PLUGINS:
        if _missing(module):
            for key in ini_keys:
                parser.addini(key, "ignored in the FrogNano sandbox (%s is not installed)" % module)


# Plugins that test requirements leave out (the sandbox's own budget, capture and single
# process stand in for them), with the names a repository may load them by (`-p NAME` in its
# addopts: the entry-point name or the module), and the ini keys and markers they declare. When
# the plugin is absent, those names load a stand-in that does nothing, and its ini keys and
# markers are declared, so that `-p timeout`, `--strict-config` and `--strict-markers` in a
# project's configuration still let its tests run.
_ABSENT_PLUGINS = (
    ("pytest_timeout", ("timeout", "pytest_timeout"),
     ("timeout", "timeout_method", "timeout_func_only", "timeout_disable_debugger_detection",
      "session_timeout"),
     ("timeout(timeout=None, method=None, func_only=False): pytest-timeout's marker (ignored: "
      "the FrogNano sandbox's CPU-time budget applies)",)),
    ("xdist", ("xdist", "xdist.plugin", "xdist.looponfail"),
     ("rsyncdirs", "rsyncignore", "looponfailroots"),
     ("xdist_group(name): pytest-xdist's marker (ignored: one process)",)),
    ("pytest_cov", ("pytest_cov", "pytest_cov.plugin"), (), ()),
    ("pytest_benchmark", ("benchmark", "pytest_benchmark", "pytest_benchmark.plugin"), (),
     ("benchmark: pytest-benchmark's marker (ignored)",)),
    ("pytest_trio", ("trio", "pytest_trio", "pytest_trio.plugin"), ("trio_mode", "trio_run"),
     ("trio: pytest-trio's marker (its tests need trio, which has no I/O manager for WASI)",)),
    ("pytest_ruff", ("ruff", "pytest_ruff"), (), ()),
    ("pytest_mypy", ("mypy", "pytest_mypy"), (), ()),
    ("pytest_black", ("black", "pytest_black"), (), ()),
    ("pytest_flake8", ("flake8", "pytest_flake8"), (), ()),
    ("pytest_isort", ("isort", "pytest_isort"), (), ()),
    ("pytest_pylint", ("pylint", "pytest_pylint", "pytest_pylint.plugin"), (), ()),
)


class _AbsentPlugin:
    """What `-p NAME` loads for a plugin the sandbox leaves out: nothing."""

    def __init__(self, module):
        self.module = module


class _XdistHookspecs:
    """pytest-xdist's hooks, declared (and never called) while its stand-in is registered:
    plugins that find "xdist" registered implement them (flaky, pytest-json-report), and
    pluggy refuses an implementation of a hook nobody declared."""

    @pytest.hookspec
    def pytest_xdist_setupnodes(self, config, specs): ...

    @pytest.hookspec
    def pytest_xdist_newgateway(self, gateway): ...

    @pytest.hookspec
    def pytest_xdist_rsyncstart(self, source, gateways): ...

    @pytest.hookspec
    def pytest_xdist_rsyncfinish(self, source, gateways): ...

    @pytest.hookspec(firstresult=True)
    def pytest_xdist_getremotemodule(self): ...

    @pytest.hookspec
    def pytest_configure_node(self, node): ...

    @pytest.hookspec
    def pytest_testnodeready(self, node): ...

    @pytest.hookspec
    def pytest_testnodedown(self, node, error): ...

    @pytest.hookspec
    def pytest_xdist_node_collection_finished(self, node, ids): ...

    @pytest.hookspec(firstresult=True)
    def pytest_xdist_make_scheduler(self, config, log): ...

    @pytest.hookspec(firstresult=True)
    def pytest_xdist_auto_num_workers(self, config): ...

    @pytest.hookspec(firstresult=True)
    def pytest_handlecrashitem(self, crashitem, report, sched): ...


def pytest_addhooks(pluginmanager):
    # Called when this plugin is registered, before pytest reads `-p` from the arguments and
    # the project's addopts: a name registered here makes that `-p NAME` a no-op.
    for module, names, _ini, _markers in _ABSENT_PLUGINS:
        if not _missing(module):
            continue
        if module == "xdist":
            pluginmanager.add_hookspecs(_XdistHookspecs)
        for name in names:
            if pluginmanager.get_plugin(name) is None and not pluginmanager.is_blocked(name):
                pluginmanager.register(_AbsentPlugin(module), name=name)


# WASI stand-ins that change how the standard library behaves here (an event loop without a
# socket pair, blocking calls of the default executor run inline, a single user): in their own
# module, which the pytest layer ships beside this one. A native run (for comparison) loads
# this plugin alone and needs none of them.
try:
    import _frognano_platform_shims  # noqa: F401
except ImportError:
    pass


def _fd_capture_works():
    """False where the interpreter cannot duplicate file descriptors (WASI): pytest's fd-level
    capture cannot work there."""
    try:
        fd = os.dup(1)
    except OSError as exc:
        return exc.errno not in _UNSUPPORTED
    os.close(fd)
    return True


_UNSUPPORTED = frozenset(
    getattr(errno, name) for name in ("ENOTSUP", "EOPNOTSUPP", "ENOSYS") if hasattr(errno, name)
)
_FD_CAPTURE = _fd_capture_works()


def _sys_capture_in_every_session():
    """Makes fd-level global capture start as sys-level capture in every pytest session of
    the process, not only the sandbox's own: the sessions `pytester` starts (a plugin's own
    tests) default to fd capture, and the first `os.dup` stopped them with an internal error."""
    from _pytest import capture

    make = capture._get_multicapture
    if getattr(make, "_frognano_sys_capture", False):
        return

    def make_multicapture(method):
        return make("sys" if method == "fd" else method)

    make_multicapture._frognano_sys_capture = True
    capture._get_multicapture = make_multicapture


def _no_session_loads_what_cannot_start_here():
    """The sandbox's own session runs without the cache and faulthandler plugins
    (`-p no:cacheprovider -p no:faulthandler`): the cache needs `os.umask` and the fault
    handler a duplicated descriptor, neither of which WASI has. The sessions `pytester`
    starts (a plugin's own tests) load pytest's default plugins afresh and stopped on them with
    an internal error; here no session of the process loads them."""
    from _pytest import config

    # stepwise keeps its state in the cache, so it goes with it (as `-p no:cacheprovider` does).
    unusable = ("cacheprovider", "stepwise", "faulthandler")
    config.default_plugins = tuple(p for p in config.default_plugins if p not in unusable)


def _distribution_of(module):
    """The distribution of a plugin module in `_ABSENT_PLUGINS`, normalised."""
    return "pytest-xdist" if module == "xdist" else module.replace("_", "-")


def _absent_distributions():
    """The normalised names of the plugins the sandbox leaves out here and stands in for."""
    return {_distribution_of(module) for module, _names, _ini, _markers in _ABSENT_PLUGINS
            if _missing(module)}


if not _FD_CAPTURE:
    for _adapt in (_sys_capture_in_every_session, _no_session_loads_what_cannot_start_here):
        try:
            _adapt()
        except Exception as exc:  # another pytest's internals: the sandbox's session still works
            sys.stderr.write("frognano: %s not applied (%s: %s)\n"
                             % (_adapt.__name__, type(exc).__name__, exc))

# Adaptations to a pytest and a Python newer than the suites, in their own module, which the
# pytest layer (and a native run) ships beside this one.
try:
    import _frognano_pytest_compat
except ImportError:
    pass
else:
    _frognano_pytest_compat.apply(not _FD_CAPTURE, _absent_distributions)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    # pytest reads the capture method here, before `pytest_configure`: `--capture=fd` (from a
    # repository's addopts or options) would fail on the first os.dup.
    namespace = early_config.known_args_namespace
    if not _FD_CAPTURE and getattr(namespace, "capture", None) == "fd":
        namespace.capture = "sys"
    yield


def _sys_capture(request, capture_class):
    from _pytest.capture import CaptureFixture

    capman = request.config.pluginmanager.getplugin("capturemanager")
    fixture = CaptureFixture(capture_class, request, _ispytest=True)
    capman.set_fixture(fixture)
    try:
        fixture._start()
        yield fixture
    finally:
        fixture.close()
        capman.unset_fixture()


if not _FD_CAPTURE:
    # Override pytest's own fixtures (plugin fixtures registered later win): capture the
    # writes to sys.stdout and sys.stderr, as capsys does, behind the same API
    # (readouterr(), disabled()). Output written to the file descriptors directly is not seen.

    @pytest.fixture
    def capfd(request):
        """Like pytest's capfd, at the `sys` level: this interpreter cannot redirect file
        descriptors."""
        from _pytest.capture import SysCapture

        yield from _sys_capture(request, SysCapture)

    @pytest.fixture
    def capfdbinary(request):
        """Like pytest's capfdbinary, at the `sys` level: this interpreter cannot redirect file
        descriptors."""
        from _pytest.capture import SysCaptureBinary

        yield from _sys_capture(request, SysCaptureBinary)


def _unregister_capture_fixtures_that_fail_to_start():
    """pytest registers a capture fixture with its capture manager before starting it; one
    whose start fails (fd-level capture: os.dup is unsupported) stayed registered, so the
    manager tried to start it again in every later test's setup and teardown, and every later
    test errored with the same OSError. Unregister it: only the test that asked for it fails."""
    from _pytest.capture import CaptureFixture

    start = CaptureFixture._start
    if getattr(start, "_frognano", False):
        return

    def _start(self):
        try:
            start(self)
        except BaseException:
            capman = self.request.config.pluginmanager.getplugin("capturemanager")
            if capman is not None and getattr(capman, "_capture_fixture", None) is self:
                capman.unset_fixture()
            raise

    _start._frognano = True
    CaptureFixture._start = _start


def installed_layout(site_packages):
    """Make `sysconfig` describe the sandbox as a native install looks: the read-only layers
    (the test requirements, pytest) are its site-packages and the zipped standard library is
    its standard library. Tools that tell third-party code from the project's own by these
    paths then treat them as a native run would: Hypothesis, for one, otherwise parses every
    module of pytest, the requirements and the standard library for constants on each run."""
    import sysconfig

    try:
        scheme = sysconfig._INSTALL_SCHEMES[sysconfig.get_default_scheme()]
    except Exception:  # another CPython: leave its layout alone
        return
    purelib, platlib = (list(site_packages) + list(site_packages))[:2]
    scheme["purelib"], scheme["platlib"] = purelib, platlib
    scheme["platstdlib"] = os.path.dirname(os.__file__)
    # An install runs the .pth files of its site-packages at start-up (setuptools' distutils
    # shim, old-style namespace packages, path additions): so does a run, for the layers on
    # its path.
    import site

    for directory in site_packages:
        if directory in sys.path and os.path.isdir(directory):
            site.addsitedir(directory)


def configure(path, coverage_root=None, shard=None, started=None):
    """Start writing results to `path`. `shard` is (index, count) for one shard of a split
    suite; `started` is the guest clock at the start of the run (now if not given)."""
    global _out, _shard
    _pending.clear()
    _collect_platform.clear()
    _positions.clear()
    _marks.clear()
    _marks["start"] = _clock() if started is None else started
    _shard = tuple(shard) if shard else None
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


def _state(nodeid):
    return _pending.setdefault(
        nodeid, {"duration": 0.0, "outcome": None, "message": None, "platform": None, "phases": {}}
    )


def _fail(state, outcome, report):
    state["outcome"], state["message"] = outcome, _message(report)
    state["platform"] = state["phases"].get(report.when)


def pytest_runtest_logstart(nodeid, location):
    # Written before the test runs: a run that dies inside it (a crash, a limit) still names it.
    _write({"started": nodeid})


def pytest_runtest_logreport(report):
    state = _state(report.nodeid)
    state["duration"] += float(getattr(report, "duration", 0.0) or 0.0)
    xfail = hasattr(report, "wasxfail")
    if report.when == "setup":
        if report.failed:
            _fail(state, "error", report)
        elif report.skipped:
            state["outcome"] = "xfailed" if xfail else "skipped"
    elif report.when == "call":
        if xfail and report.skipped:
            state["outcome"] = "xfailed"
        elif xfail and report.passed:
            state["outcome"] = "xpassed"
        elif report.failed:
            _fail(state, "failed", report)
        elif report.skipped:
            state["outcome"] = "skipped"
        else:
            state["outcome"] = "passed"
    elif report.when == "teardown":
        if report.failed and state["outcome"] in (None, "passed", "skipped", "xfailed", "xpassed"):
            _fail(state, "error", report)
        _pending.pop(report.nodeid, None)
        record = {
            "id": report.nodeid,
            "outcome": state["outcome"] or "error",
            "duration_s": round(state["duration"], 6),
        }
        if state["message"]:
            record["message"] = state["message"]
        if state["platform"] and record["outcome"] in ("failed", "error"):
            record["platform"] = state["platform"]
        position = _positions.get(report.nodeid)
        if position is not None:
            record["position"] = position
        _write(record)


def pytest_sessionstart(session):
    _marks["session"] = _clock()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    """One shard of a split suite: keep every `count`-th test from `index` on (dealt like
    cards, so that slow modules spread over the shards), after every other selection."""
    if _shard is None:
        return
    index, count = _shard
    kept = []
    deselected = []
    for position, item in enumerate(items):
        if position % count == index:
            kept.append(item)
            _positions[item.nodeid] = position
        else:
            deselected.append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
    items[:] = kept


def pytest_collection_finish(session):
    _marks["collected"] = _clock()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtestloop(session):
    _marks["loop_start"] = _clock()
    yield
    _marks["loop_end"] = _clock()
    # Every test has its verdict: a crash after this point (a finalizer, interpreter shutdown)
    # changes none of them.
    if _out is not None:
        _write({"tests_finished": True})


# Platform gaps: which feature WebAssembly (WASI) lacks, told from a failure's exception.
#
# Labels (short and stable): "threads", "subprocesses", "multiprocessing", "sockets",
# "signals", "ssl", "fd duplication"
# (os.dup/os.dup2, fd-level capture), "ctypes", "locale", "mmap", "symlinks",
# "os.<name>" / "time.<name>" / "select.<name>" for a function the module lacks (e.g.
# "os.umask", "os.getuid", "os.pipe", "time.tzset"), the name of another standard-library
# module the platform lacks (e.g. "termios", "fcntl", "resource", "pwd", "curses"),
# "test.support" for CPython's own test helpers (not in the image's standard library), "trio"
# for what imports trio (no I/O manager for WASI, so layers leave it out), and
# "unsupported operation" for any other "not supported"/"not implemented" OS error.

_MODULE_LABELS = {
    "_ssl": "ssl",
    "_hashlib": "ssl",
    "_thread": "threads",
    "_multiprocessing": "multiprocessing",
    "_posixshmem": "multiprocessing",
    "_ctypes": "ctypes",
    "_posixsubprocess": "subprocesses",
    "_socket": "sockets",
    "_curses": "curses",
    "_curses_panel": "curses",
}

# Standard-library code that reaches a missing feature, outermost first: the first of these a
# failing call went through names the feature (multiprocessing.Pool fails on a missing
# os.pipe). asyncio itself runs (see `_frognano_platform_shims`); what its calls reach
# (threads, subprocesses, sockets) names their failures.
_STDLIB_LABELS = (
    ("multiprocessing/", "multiprocessing"),
    ("concurrent/futures/process.py", "multiprocessing"),
    ("concurrent/futures/thread.py", "threads"),
    ("threading.py", "threads"),
    ("subprocess.py", "subprocesses"),
    ("socket.py", "sockets"),
    ("socketserver.py", "sockets"),
    ("http/", "sockets"),
    ("urllib/", "sockets"),
    ("xmlrpc/", "sockets"),
    ("smtplib.py", "sockets"),
    ("ftplib.py", "sockets"),
    ("ssl.py", "ssl"),
    ("signal.py", "signals"),
    ("ctypes/", "ctypes"),
    ("locale.py", "locale"),
    ("mmap.py", "mmap"),
)

_OS_PROCESS = frozenset(
    ("fork", "forkpty", "system", "popen", "wait", "waitpid", "wait3", "wait4", "waitid",
     "waitstatus_to_exitcode", "posix_spawn", "posix_spawnp", "register_at_fork", "P_WAIT",
     "P_NOWAIT")
)
_MISSING_ATTRIBUTE = re.compile(r"module '([\w.]+)' has no attribute '(\w+)'")
_MISSING_NAME = re.compile(r"cannot import name '(\w+)' from '([\w.]+)'")
_OS_CALL = re.compile(r"\bos\.(\w+)\s*\(")
_UNAVAILABLE = re.compile(r"^(\w+) is unavailable on wasm")


def _stdlib_dir():
    return os.path.dirname(os.__file__) + "/"


def _frames(exc):
    """(filename, lineno, frame) of the exception's traceback, outermost first (at most 200)."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno, tb.tb_frame))
        tb = tb.tb_next
    return frames[-200:]


def _innermost_line(frames):
    if not frames:
        return ""
    import linecache

    name, line, frame = frames[-1]
    try:
        return linecache.getline(name, line, frame.f_globals)
    except Exception:
        return ""


def _stdlib_label(frames):
    """The feature the innermost standard-library call of the traceback implies, if any."""
    stdlib = _stdlib_dir()
    run = []
    for name, _, _ in reversed(frames):
        if name.startswith("<frozen"):
            continue
        if not name.startswith(stdlib) or "-packages/" in name:
            break
        run.append(name[len(stdlib):])
    for rel in reversed(run):
        for prefix, label in _STDLIB_LABELS:
            if rel == prefix or (prefix.endswith("/") and rel.startswith(prefix)):
                return label
    return None


def _attribute_label(module, name):
    if module in ("os", "posix"):
        if name in _OS_PROCESS or name.startswith(("exec", "spawn")) or re.match(r"W[A-Z]", name):
            return "subprocesses"
        if name in ("kill", "killpg"):
            return "signals"
        return "os." + name
    if module in ("signal", "_signal"):
        return "signals"
    if module in ("socket", "_socket"):
        return "sockets"
    if module in ("time", "select"):
        return module + "." + name
    if module == "ctypes":
        return "ctypes"
    return None


def _intrinsic_label(exc, frames):
    """The feature `exc` itself shows missing, or None when it is no platform gap."""
    text = str(exc)
    marked = getattr(exc, "frognano_platform_gap", None)
    if isinstance(marked, str):  # raised by a FrogNano stand-in (the `_ssl` one)
        return marked
    if isinstance(exc, RuntimeError) and "can't start new thread" in text:
        return "threads"
    if isinstance(exc, ModuleNotFoundError):
        name = exc.name or ""
        # CPython's own test package (test.support and its helpers) is not part of the image's
        # standard library; suites written against it cannot run here.
        if name == "test" or name.startswith("test.support"):
            return "test.support"
        # trio installs but has no I/O manager for WASI (no epoll or kqueue): the sandbox
        # leaves it out of layers, and what imports it fails for that.
        if name == "trio" or name.startswith("trio."):
            return "trio"
        stdlib = (
            "Unsupported platform for standard library module" in text
            or ("Standard library module" in text and "was not found" in text)
            or name in getattr(sys, "stdlib_module_names", ())
        )
        if name and stdlib:
            return _MODULE_LABELS.get(name, name.lstrip("_"))
        return None
    if isinstance(exc, AttributeError):
        match = _MISSING_ATTRIBUTE.match(text)
        return _attribute_label(*match.groups()) if match else None
    if isinstance(exc, ImportError):  # `from os import getuid`
        match = _MISSING_NAME.match(text)
        return _attribute_label(match.group(2), match.group(1)) if match else None
    if isinstance(exc, OSError):
        if "does not support processes" in text:
            return "subprocesses"
        match = _UNAVAILABLE.match(text)
        if match:
            return match.group(1)
        line = _innermost_line(frames)
        if exc.errno in _UNSUPPORTED:
            call = _OS_CALL.search(line)
            if call:
                return "fd duplication" if call.group(1) in ("dup", "dup2") else "os." + call.group(1)
            if "socket" in line:
                return "sockets"
            return "unsupported operation"
        if exc.errno == errno.EPERM and "symlink" in line:
            return "symlinks"
        return None
    if isinstance(exc, NotImplementedError) and re.search(
        r"wasi|wasm|platform|this python build", text, re.IGNORECASE
    ):
        return "unsupported operation"
    if type(exc).__module__ == "locale" and type(exc).__name__ == "Error":
        return "locale"
    return None


def _platform_label(exc):
    """The missing platform feature that explains `exc`: its own, else that of an exception it
    was raised from or while handling, or of one in an exception group. None for ordinary
    failures (an assertion that fails is never a platform gap)."""
    seen = set()
    todo = [exc]
    while todo and len(seen) < 16:
        exc = todo.pop(0)
        if exc is None or id(exc) in seen:
            continue
        seen.add(id(exc))
        frames = _frames(exc)
        label = _intrinsic_label(exc, frames)
        if label:
            return _stdlib_label(frames) or label
        todo.extend(getattr(exc, "exceptions", None) or ())
        todo.append(exc.__cause__)
        if not exc.__suppress_context__:
            todo.append(exc.__context__)
    return None


def _safe_platform_label(excinfo):
    if excinfo is None:
        return None
    try:
        return _platform_label(excinfo.value)
    except Exception:  # never let classification break the run
        return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        label = _safe_platform_label(call.excinfo)
        if label:
            _state(report.nodeid)["phases"][report.when] = label


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    call = report.__dict__.get("call")
    if report.failed and call is not None:
        label = _safe_platform_label(call.excinfo)
        if label:
            _collect_platform[report.nodeid or "<collection>"] = label


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    _coverage_call_start()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    _coverage_call_end(item.nodeid)


def pytest_collectreport(report):
    # Every shard collects the whole suite: the first one alone reports collection errors.
    if report.failed and (_shard is None or _shard[0] == 0):
        nodeid = report.nodeid or "<collection>"
        record = {"id": nodeid, "outcome": "error", "duration_s": 0.0, "message": _message(report)}
        label = _collect_platform.pop(nodeid, None)
        if label:
            record["platform"] = label
        _write(record)


def finish(exit_code):
    global _out
    if _Coverage.active is not None:
        _Coverage.active.stop()
        _Coverage.active = None
    if _out is not None:
        _write({"exit_code": int(exit_code)})
        _marks["finish"] = _clock()
        _write({"profile": _marks})
        _out.close()
        _out = None


# Outside the sandbox (e.g. a native run for comparison), load with `-p` and name the
# results file in FROGNANO_RESULTS.
class _Benchmark:
    """pytest-benchmark's `benchmark` fixture as its `--benchmark-disable` mode behaves: the
    function runs once and its result is returned (timing many rounds is no test's point)."""

    def __init__(self):
        self.extra_info = {}
        self.group = None
        self.name = ""
        self.stats = None
        self.disabled = True

    def __call__(self, function, *args, **kwargs):
        return function(*args, **kwargs)

    def pedantic(self, target, args=(), kwargs=None, setup=None, rounds=1, warmup_rounds=0,
                 iterations=1):
        if setup is not None:
            prepared = setup()
            if prepared is not None:
                args, kwargs = prepared
        return target(*args, **(kwargs or {}))

    def weave(self, target, **kwargs):
        pass


if _missing("pytest_benchmark"):

    @pytest.fixture
    def benchmark():
        """Runs the benchmarked function once (pytest-benchmark is not in the sandbox)."""
        return _Benchmark()


def pytest_configure(config):
    for module, _names, _ini, markers in _ABSENT_PLUGINS:
        if _missing(module):
            for marker in markers:
                config.addinivalue_line("markers", marker)
    if not _FD_CAPTURE:
        if getattr(config.option, "capture", None) == "fd":
            config.option.capture = "sys"
        try:
            _unregister_capture_fixtures_that_fail_to_start()
        except Exception:  # another pytest version: its capture internals differ
            pass
    path = os.environ.get("FROGNANO_RESULTS")
    if _out is None and path:
        configure(path)


def pytest_unconfigure(config):
    if os.environ.get("FROGNANO_RESULTS"):
        finish(getattr(config, "_frognano_exit", 0))


def pytest_sessionfinish(session, exitstatus):
    session.config._frognano_exit = int(exitstatus)
