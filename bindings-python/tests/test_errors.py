import pytest

import frognano


def test_hierarchy():
    for name in ["SetupError", "SandboxFailure", "RepoNotFoundError", "ConfigError", "RequirementsError", "InvalidArgumentError",
                 "TaskError", "EpisodeError", "ActionError", "SynthesisError"]:
        assert issubclass(getattr(frognano, name), frognano.FrognanoError)
    assert issubclass(frognano.RepoNotFoundError, FileNotFoundError)
    assert issubclass(frognano.InvalidArgumentError, ValueError)
    assert issubclass(frognano.RequirementsError, frognano.ConfigError)


def test_missing_repository(sandbox, tmp_path):
    with pytest.raises(frognano.RepoNotFoundError, match="not a directory"):
        sandbox.run_tests(tmp_path / "missing")
    with pytest.raises(FileNotFoundError):
        sandbox.run_tests(str(tmp_path / "missing"))


@pytest.mark.parametrize(
    "limits",
    [{"timeout": 0}, {"timeout": -3.0}, {"timeout": float("nan")}, {"memory_mb": 0}, {"memory_mb": -1}, {"output_bytes": -5}],
)
def test_invalid_limits(sandbox, sample_repo, limits):
    with pytest.raises(frognano.InvalidArgumentError):
        sandbox.run_tests(sample_repo, **limits)


def test_invalid_constructor_arguments():
    with pytest.raises(frognano.InvalidArgumentError, match="unknown image"):
        frognano.Sandbox(image="python-2.7")
    with pytest.raises(ValueError, match="workers"):
        frognano.Sandbox(workers=0)
    with pytest.raises(TypeError):
        frognano.Sandbox(workers="many")


def test_malformed_config(sandbox, make_repo):
    repo = make_repo({"frognano.toml": "[test\nargs = 3\n", "test_x.py": "def test_x():\n    pass\n"})
    with pytest.raises(frognano.ConfigError, match="frognano.toml"):
        sandbox.run_tests(repo)


def test_wrong_argument_types(sandbox, sample_repo):
    with pytest.raises(TypeError):
        sandbox.run_tests(None)
    with pytest.raises(TypeError):
        sandbox.run_tests(sample_repo, "-k")  # a str, not a sequence of str
