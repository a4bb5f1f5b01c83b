# FrogNano per-run prelude: runs pytest on /work with the run's configuration.
# `__FROGNANO_CONFIG__` is replaced by a JSON string literal by the host.
def _frognano_run(config):
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
    sys.argv = ["pytest"] + config["args"]
    plugin = importlib.import_module(config["plugin"])
    plugin.configure(config["results"], config.get("coverage"))
    code = 3
    try:
        import pytest

        code = int(pytest.main(config["args"], plugins=[plugin]))
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


_frognano_run(__FROGNANO_CONFIG__)
