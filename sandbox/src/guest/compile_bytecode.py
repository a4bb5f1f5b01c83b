# FrogNano bytecode builder: compiles a pristine copy of a repository to checked-hash .pyc
# files, and its test modules to pytest's assertion-rewritten .pyc files. It parses and
# compiles only; no code of the repository runs. `__FROGNANO_CONFIG__` is replaced by the host.
def _frognano_compile(config):
    import ast
    import compileall
    import fnmatch
    import importlib.util
    import json
    import os
    import py_compile

    config = json.loads(config)
    root = config["root"]
    compileall.compile_dir(
        root, quiet=2, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH
    )
    from _pytest.assertion import rewrite

    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != "__pycache__" and not d.startswith(".")]
        for name in filenames:
            if not (name == "conftest.py" or any(fnmatch.fnmatch(name, p) for p in config["patterns"])):
                continue
            path = os.path.join(dirpath, name)
            try:
                with open(path, "rb") as handle:
                    source = handle.read()
                tree = ast.parse(source, filename=path)
                rewrite.rewrite_asserts(tree, source, path, None)
                code = compile(tree, path, "exec", dont_inherit=True)
                cache = os.path.join(dirpath, "__pycache__")
                os.makedirs(cache, exist_ok=True)
                with open(os.path.join(cache, name[:-3] + rewrite.PYC_TAIL), "wb") as out:
                    rewrite._write_pyc_fp(out, importlib.util.source_hash(source), code)
            except (SyntaxError, ValueError, OSError):
                pass  # pytest will report it when it imports the file


_frognano_compile(__FROGNANO_CONFIG__)
