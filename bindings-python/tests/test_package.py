from pathlib import Path

import frognano

SOURCE_TREE = Path(__file__).resolve().parents[1]


def test_runs_against_the_installed_package():
    installed = Path(frognano.__file__).resolve()
    assert SOURCE_TREE not in installed.parents, installed
    assert (installed.parent / "py.typed").is_file()
    assert (installed.parent / "_frognano.pyi").is_file()


def test_version_and_cache_dir():
    assert frognano.__version__.count(".") == 2
    assert isinstance(frognano.cache_dir(), str) or hasattr(frognano.cache_dir(), "__fspath__")
