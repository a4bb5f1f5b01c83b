"""Task synthesis through the installed package: Synthesizer, synthesize, mutation_operators."""

from pathlib import Path

import pytest

import frognano

TEXTKIT = Path(__file__).resolve().parents[2] / "examples" / "repos" / "textkit"


@pytest.fixture(scope="module")
def synth(sandbox):
    return frognano.Synthesizer(TEXTKIT, sandbox=sandbox, seed=7)


@pytest.fixture(scope="module")
def tasks(synth):
    return synth.generate(4)


def test_generated_tasks_are_well_formed(tasks):
    assert len(tasks) == 4
    assert len({t["id"] for t in tasks}) == 4
    for task in tasks:
        assert task["id"].startswith("textkit__")
        assert task["repo"]["path"] == str(TEXTKIT.resolve())
        assert task["repo"]["content_hash"]
        assert task["bug_patch"].startswith("diff --git")
        assert task["fail_to_pass"] and task["pass_to_pass"]
        assert not set(task["fail_to_pass"]) & set(task["pass_to_pass"])
        assert "textkit" in task["problem_statement"]
        difficulty = task["metadata"]["difficulty"]
        assert {"operators", "bug_count", "hint_level", "files_changed", "lines_changed",
                "fail_to_pass", "pass_to_pass"} <= difficulty.keys()
        assert difficulty["bug_count"] == 1 and difficulty["hint_level"] == 2
        assert difficulty["fail_to_pass"] == len(task["fail_to_pass"])


def test_tasks_round_trip_like_loaded_ones(tasks, tmp_path):
    path = tmp_path / "synth.jsonl"
    frognano.save_tasks(path, tasks)
    assert [t["id"] for t in frognano.load_tasks(path)] == [t["id"] for t in tasks]
    assert frognano.to_swe_bench(tasks[0])["FAIL_TO_PASS"] == tasks[0]["fail_to_pass"]


def test_oracle_resolves_every_task_and_noop_none(sandbox, tasks):
    summary, _ = frognano.evaluate(tasks, "oracle", sandbox=sandbox)
    assert summary["episodes"] == 4 and summary["resolved_rate"] == 1.0, summary
    summary, _ = frognano.evaluate(tasks, "noop", sandbox=sandbox)
    assert summary["episodes"] == 4 and summary["resolved_rate"] == 0.0, summary


def test_properties(synth, tasks):
    stats = synth.stats
    assert stats["valid"] >= len(tasks) and stats["candidates"] >= stats["valid"]
    assert stats["tasks_per_minute"] > 0 and stats["by_operator"]
    intake = synth.intake
    assert len(intake["passing"]) >= 40 and isinstance(intake["passing"], list)
    for key in ("flaky", "failing", "skipped", "order_dependent"):
        assert intake[key] == []
    assert intake["suite_seconds"] > 0 and "coverage" not in intake
    sites = synth.sites_per_operator
    assert sites["op_swap"] > 0 and all(isinstance(n, int) for n in sites.values())
    config = synth.config
    assert (config["seed"], config["max_bugs"], config["scope"], config["hint_levels"]) == (7, 1, "file", [2])
    assert "Synthesizer(repo=" in repr(synth)


def test_generate_request_and_the_synthesizer_protocol(synth, tasks):
    (task,) = synth.generate_request(1, operators=["op_swap"], hint_levels=[0])
    assert task["metadata"]["difficulty"]["operators"] == ["op_swap"]
    assert task["metadata"]["difficulty"]["hint_level"] == 0
    assert task["id"] not in {t["id"] for t in tasks}  # never the same bug twice
    assert synth.feedback([{"task_id": task["id"], "resolved": False}]) is None
    assert synth.feedback([]) is None
    with pytest.raises(TypeError):
        synth.feedback(3)
    assert synth.generate(0) == [] and synth.propose(0) == []
    with pytest.raises(frognano.InvalidArgumentError, match="bug counts"):
        synth.generate_request(1, min_bugs=2, max_bugs=1)
    with pytest.raises(ValueError, match="unknown mutation operator"):
        synth.generate_request(1, operators=["no_such_op"])
    with pytest.raises(ValueError, match="hint level"):
        synth.generate_request(1, hint_levels=[7])


def test_same_seed_same_tasks(sandbox, sample_repo):
    # Without the reproduction runs, to keep it cheap: determinism does not depend on them.
    # Generous timeouts, as in the Rust test: a validation run over its time budget is
    # rejected, and the machine's load is the one input of generation that is not the seed
    # (a run of this test saw one candidate rejected for its time limit, and not the other).
    options = dict(sandbox=sandbox, seed=11, reproduce=False, timeout_factor=30.0)
    first, stats = frognano.synthesize(sample_repo, 3, **options)
    again = frognano.Synthesizer(str(sample_repo), **options)
    assert again.config["reproduce"] is False
    again = again.propose(3)
    assert len(first) == 3 and stats["valid"] == 3
    assert [t["id"] for t in first] == [t["id"] for t in again]
    assert [t["bug_patch"] for t in first] == [t["bug_patch"] for t in again]


@pytest.mark.parametrize(
    "options",
    [
        {"scope": "galaxy"},
        {"operators": ["no_such_op"]},
        {"max_bugs": 0},
        {"max_bugs": 9},
        {"hint_levels": (7,)},
        {"hint_levels": ()},
        {"hint_levels": (-1,)},
        {"workers": 0},
        {"max_candidates": 0},
        {"timeout_factor": 0.5},
        {"seed": -1},
    ],
)
def test_bad_options_raise_value_error(sandbox, sample_repo, options):
    with pytest.raises(frognano.InvalidArgumentError):
        frognano.Synthesizer(sample_repo, sandbox=sandbox, **options)
    with pytest.raises(ValueError):
        frognano.synthesize(sample_repo, 1, sandbox=sandbox, **options)


def test_wrong_types_and_missing_repository(sandbox, sample_repo, tmp_path):
    with pytest.raises(TypeError):
        frognano.Synthesizer(sample_repo, sandbox=sandbox, operators="op_swap")
    with pytest.raises(TypeError):
        frognano.Synthesizer(sample_repo, sandbox=sandbox, bogus=1)
    with pytest.raises(FileNotFoundError):
        frognano.Synthesizer(tmp_path / "missing", sandbox=sandbox)


def test_a_repository_without_tests_is_a_synthesis_error(sandbox, make_repo):
    repo = make_repo({"pkg/__init__.py": "", "pkg/core.py": "def add(a, b):\n    return a + b\n"})
    with pytest.raises(frognano.SynthesisError, match="collected no tests") as error:
        frognano.Synthesizer(repo, sandbox=sandbox)
    assert isinstance(error.value, frognano.FrognanoError)


def test_a_repository_whose_tests_all_fail_is_a_synthesis_error(sandbox, make_repo):
    repo = make_repo({"calc.py": "def add(a, b):\n    return a - b\n",
                      "tests/test_calc.py": "from calc import add\n\ndef test_add():\n    assert add(2, 2) == 4\n"})
    with pytest.raises(frognano.SynthesisError, match="no test passes reliably"):
        frognano.Synthesizer(repo, sandbox=sandbox)


def test_mutation_operators():
    operators = frognano.mutation_operators()
    assert len(operators) >= 20
    names = [op["name"] for op in operators]
    assert "op_swap" in names and "off_by_one_slice" in names
    assert len(set(names)) == len(names)
    assert {op["family"] for op in operators} == {"swe-smith", "extra"}
    assert all(op["description"] for op in operators)


def test_ctrl_c_cancels_generation(sample_repo, ctrl_c):
    ctrl_c(
        f"synth = frognano.Synthesizer({str(sample_repo)!r}, seed=3)",
        "synth.generate(100000)",
        after=1.5,
        timeout=30,
    )
