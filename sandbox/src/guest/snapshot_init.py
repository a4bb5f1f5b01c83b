# FrogNano snapshot initialiser: runs once at setup, before the memory snapshot is taken.
# It compiles the pytest layer to bytecode with the guest's own CPython, imports pytest with
# every default plugin, and runs one warm-up session, so that each later run starts with all
# of that already in memory. For a snapshot of a requirements layer it also puts the layer on
# the path and imports the modules the repository's tests import (the warm-up session loads
# the layer's pytest plugins).
def _frognano_init(config):
    import compileall
    import importlib
    import json
    import os
    import sys

    config = json.loads(config)
    compileall.compile_dir(config["layer"], quiet=1)
    sys.path.insert(0, config["layer"])
    if config.get("deps"):
        sys.path.insert(0, config["deps"])
    importlib.invalidate_caches()
    os.chdir(config["cwd"])
    os.devnull = config["devnull"]
    import pytest
    import _pytest.config

    plugin = importlib.import_module(config["plugin"])
    # Third-party code (Hypothesis) may read the layout when it is imported.
    plugin.installed_layout(config["site_packages"])
    for name in _pytest.config.default_plugins:
        importlib.import_module("_pytest." + name)
    for name in list(config["preload"]) + list(config.get("deps_modules") or ()):
        try:
            importlib.import_module(name)
        except BaseException:  # a module that cannot import here is imported by its run
            pass
    plugin.configure(config["results"])
    code = pytest.main(config["args"], plugins=[plugin])
    plugin.finish(int(code))
    for name in list(sys.modules):
        if name.startswith("test_frognano_warmup"):
            del sys.modules[name]
    sys.stdout.flush()
    sys.stderr.flush()


_frognano_init(__FROGNANO_CONFIG__)
