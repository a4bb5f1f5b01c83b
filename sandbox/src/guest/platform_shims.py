"""FrogNano's stand-ins for what WebAssembly (WASI) lacks, applied when the guest's pytest
plugin loads (importing this module applies them; each is a no-op where the feature exists):

- asyncio's event loop starts without the socket pair WASI cannot open;
- what an event loop hands its default executor runs at once where threads cannot start;
- the process has one user, as a container has;
- starting a program fails as it does where the program is not installed;
- names the standard library removed after Python 3.9 that older suites still import
  (`collections.Mapping` and the other ABC aliases, `typing.no_type_check_decorator`).

Each failure to apply one is reported on stderr and leaves the standard library as it was.
"""

import os
import sys


def _asyncio_without_a_socket_pair():
    """Lets asyncio's event loop start where sockets cannot be paired (WASI).

    A selector event loop opens a socket pair (its "self-pipe") when it is made, only to be
    woken from other threads (`call_soon_threadsafe`) and signal handlers, neither of which
    WASI has; without the pair, `asyncio.run` failed before the first coroutine ran. Here a
    loop made where the pair cannot be opened has none (`_write_to_self` already does nothing
    without one), so coroutines, tasks, timers, queues and `IsolatedAsyncioTestCase` run; what
    still needs threads, subprocesses or sockets fails as such."""
    import socket

    try:
        ends = socket.socketpair()
    except OSError:
        pass
    else:
        for end in ends:
            end.close()
        return
    from asyncio import selector_events

    loop_class = selector_events.BaseSelectorEventLoop
    if getattr(loop_class, "_frognano_without_self_pipe", False):
        return
    close_self_pipe = loop_class._close_self_pipe

    def make_no_self_pipe(self):
        self._ssock = None
        self._csock = None

    def close_any_self_pipe(self):
        if getattr(self, "_ssock", None) is not None:
            close_self_pipe(self)

    loop_class._make_self_pipe = make_no_self_pipe
    loop_class._close_self_pipe = close_any_self_pipe
    loop_class._frognano_without_self_pipe = True


def _threads_start():
    import _thread

    try:
        _thread.start_new_thread(lambda: None, ())
    except (RuntimeError, AttributeError, OSError):
        return False
    return True


def _default_executor_calls_inline():
    """Runs what an event loop hands its default executor (`run_in_executor(None, ...)`,
    `asyncio.to_thread`) at once, where threads cannot start (WASI).

    Async libraries use the default executor for blocking calls, file operations above all
    (aiofiles), and every such call failed for want of a thread. With one thread the call can
    only run where it is handed over: its result or exception is ready before the caller
    awaits it. An explicit executor is left alone (it fails as before, labelled threads)."""
    from asyncio import base_events

    loop_class = base_events.BaseEventLoop
    if getattr(loop_class, "_frognano_inline_executor", False):
        return
    run_in_executor = loop_class.run_in_executor

    def run_inline(self, executor, func, *args):
        if executor is not None:
            return run_in_executor(self, executor, func, *args)
        self._check_closed()
        future = self.create_future()
        try:
            result = func(*args)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:
            future.set_exception(exc)
        else:
            future.set_result(result)
        return future

    loop_class.run_in_executor = run_inline
    loop_class._frognano_inline_executor = True


try:
    _asyncio_without_a_socket_pair()
    if not _threads_start():
        _default_executor_calls_inline()
except Exception as exc:  # another CPython's asyncio internals: asyncio stays as it was
    sys.stderr.write("frognano: asyncio left unchanged (%s: %s)\n" % (type(exc).__name__, exc))


def _a_single_user():
    """Gives the process a user, as a container image has one: WASI has no users, so
    `os.getuid` and its kin are missing and `pwd` and `grp` do not import, and suites that only
    ask who runs them (cache paths, `getpwuid(getuid())`) stopped there. Here the process runs
    as one user, uid and gid 1000, named by `USER` (what `getpass.getuser()` reads), at home in
    `HOME`; asking for any other user fails as it would for an unknown one."""
    import collections
    import types

    if hasattr(os, "getuid"):
        return
    uid = gid = 1000
    for name in ("getuid", "geteuid"):
        setattr(os, name, lambda: uid)
    for name in ("getgid", "getegid"):
        setattr(os, name, lambda: gid)
    os.getgroups = lambda: [gid]

    def user_name():
        return os.environ.get("USER") or "frognano"

    passwd = collections.namedtuple(
        "struct_passwd", "pw_name pw_passwd pw_uid pw_gid pw_gecos pw_dir pw_shell")
    group = collections.namedtuple("struct_group", "gr_name gr_passwd gr_gid gr_mem")

    def the_user():
        return passwd(user_name(), "x", uid, gid, user_name(), os.environ.get("HOME", "/"),
                      "/bin/sh")

    def the_group():
        return group(user_name(), "x", gid, [user_name()])

    def lookup(make, field, value, what):
        entry = make()
        if getattr(entry, field) == value:
            return entry
        raise KeyError("%s not found: %r" % (what, value))

    pwd = types.ModuleType("pwd", "FrogNano's single-user stand-in for the password database.")
    pwd.struct_passwd = passwd
    pwd.getpwuid = lambda n: lookup(the_user, "pw_uid", n, "getpwuid(): uid")
    pwd.getpwnam = lambda n: lookup(the_user, "pw_name", n, "getpwnam(): name")
    pwd.getpwall = lambda: [the_user()]
    grp = types.ModuleType("grp", "FrogNano's single-user stand-in for the group database.")
    grp.struct_group = group
    grp.getgrgid = lambda n: lookup(the_group, "gr_gid", n, "getgrgid(): gid")
    grp.getgrnam = lambda n: lookup(the_group, "gr_name", n, "getgrnam(): name")
    grp.getgrall = lambda: [the_group()]
    sys.modules.setdefault("pwd", pwd)
    sys.modules.setdefault("grp", grp)


try:
    _a_single_user()
except Exception as exc:
    sys.stderr.write("frognano: no user identity (%s: %s)\n" % (type(exc).__name__, exc))


def _names_removed_since_python_3_9():
    """Puts back names later Pythons removed that suites written for older ones still use: the
    ABC aliases in `collections` (`from collections import Mapping`, removed in 3.10) and
    `typing.no_type_check_decorator` (removed in 3.15). The interpreter here is newer than
    most suites; without them a conftest or a test module stopped at import. Each is the
    object (or the behaviour) the removed name had."""
    import collections
    import collections.abc
    import functools
    import typing

    for name in collections.abc.__all__:
        if not name.startswith("_") and not hasattr(collections, name):
            setattr(collections, name, getattr(collections.abc, name))
    if not hasattr(typing, "no_type_check_decorator"):

        def no_type_check_decorator(decorator):
            """Makes `decorator` give functions that type checkers do not check."""

            @functools.wraps(decorator)
            def wrapped_decorator(*args, **kwargs):
                return typing.no_type_check(decorator(*args, **kwargs))

            return wrapped_decorator

        typing.no_type_check_decorator = no_type_check_decorator


try:
    _names_removed_since_python_3_9()
except Exception as exc:
    sys.stderr.write("frognano: removed names not restored (%s: %s)\n"
                     % (type(exc).__name__, exc))


def _no_program_is_found():
    """Makes starting a program fail as it does where the program is not installed. WASI runs
    no processes, and `subprocess.Popen` raised a bare OSError for it; code that looks for an
    optional tool by running it (networkx's conftest runs `dot -V` and catches
    `FileNotFoundError`) stopped there instead of going on without the tool. The error is now a
    `FileNotFoundError`, still saying that processes are unsupported (a test that needs one is
    labelled `subprocesses`)."""
    import errno
    import subprocess

    init = subprocess.Popen.__init__
    if getattr(init, "_frognano", False):
        return

    def __init__(self, args, *rest, **options):
        try:
            init(self, args, *rest, **options)
        except FileNotFoundError:
            raise
        except OSError as exc:
            if "does not support processes" not in str(exc):
                raise
            program = options.get("executable") or args
            if not isinstance(program, (str, bytes, os.PathLike)):
                program = next(iter(program), "")
            raise FileNotFoundError(
                errno.ENOENT, "wasi does not support processes, so no program is found",
                os.fsdecode(program)) from exc

    __init__._frognano = True
    subprocess.Popen.__init__ = __init__


try:
    _no_program_is_found()
except Exception as exc:
    sys.stderr.write("frognano: subprocess left unchanged (%s: %s)\n"
                     % (type(exc).__name__, exc))
