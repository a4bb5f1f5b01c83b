# FrogNano per-run prelude: runs pytest on /work with the run's configuration.
# `__FROGNANO_CONFIG__` is replaced by a JSON string literal by the host.
def _frognano_run(config):
    import time

    started = time.perf_counter()
    import importlib
    import json
    import os
    import random
    import sys

    config = json.loads(config)
    for entry in reversed(config["sys_path"]):
        if entry in sys.path:
            sys.path.remove(entry)
        sys.path.insert(0, entry)
    importlib.invalidate_caches()
    os.environ.clear()
    os.environ.update(config["env"])
    os.chdir(config["cwd"])
    # No /dev/null in WASI: point os.devnull at a real file so logging and caplog work.
    os.devnull = config["devnull"]
    random.seed()
    # Plugins and layer packages the sandbox imported before pytest starts (to check that they
    # load, or in a snapshot) cannot have their asserts rewritten, and pytest says so with a
    # warning at configuration time. A project whose filterwarnings has "error" would turn that
    # note about the sandbox's preparation into an internal error before any test ran: ignore
    # exactly that message (the project's own filters apply to everything else). Likewise
    # pytest's notices of what its next major release removes (`config.inicfg`): the sandbox's
    # pytest is newer than most projects were written against, and under "error" such a
    # notice about a feature that still works stopped their suites before any test ran.
    args = (["-W", "ignore:Module already imported so cannot be rewritten:"
                   "pytest.PytestAssertRewriteWarning",
             "-W", "ignore::pytest.PytestRemovedIn10Warning"]
            + list(config["args"]) + _unloadable_plugins(os.environ))
    sys.argv = ["pytest"] + args
    plugin = importlib.import_module(config["plugin"])
    plugin.installed_layout(config["site_packages"])
    plugin.configure(config["results"], config.get("coverage"), config.get("shard"), started)
    code = 3
    try:
        import pytest

        code = int(pytest.main(args, plugins=[plugin]))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException as exc:  # report, never lose the results file
        sys.stderr.write("frognano: pytest raised %r\n" % (exc,))
        code = 3
    finally:
        plugin.finish(code)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
    return code


def _unloadable_plugins(environ):
    """`-p no:NAME` for each pytest plugin (entry point) that cannot even be imported here (it
    needs a feature WebAssembly lacks, e.g. os.pipe), so that it costs only its own features
    instead of the whole run. Loading is what pytest does next anyway (modules stay imported)."""
    if environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return []
    import sys
    from importlib.metadata import entry_points

    blocked = []
    try:
        plugins = list(entry_points(group="pytest11"))
    except Exception:
        return []
    for entry in plugins:
        try:
            entry.load()
        except Exception as exc:
            sys.stderr.write("frognano: pytest plugin %s (%s) cannot load in the sandbox (%s: %s): "
                             "disabled\n" % (entry.name, entry.value, type(exc).__name__, exc))
            blocked += ["-p", "no:" + entry.name]
    return blocked


_frognano_run(__FROGNANO_CONFIG__)
