import os
import textwrap
from pathlib import Path

import pytest

import frognano

REPOS = Path(__file__).resolve().parents[2] / "examples" / "repos"


@pytest.fixture(scope="session")
def sandbox():
    return frognano.Sandbox()


@pytest.fixture
def make_repo(tmp_path):
    """Writes {relative path: source} into a fresh directory and returns it."""

    def make(files):
        for name, source in files.items():
            path = tmp_path / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(source))
        return tmp_path

    return make


@pytest.fixture
def sample_repo():
    return REPOS / "textkit"


def pytest_report_header(config):
    return "frognano %s from %s" % (frognano.__version__, os.path.dirname(frognano.__file__))
