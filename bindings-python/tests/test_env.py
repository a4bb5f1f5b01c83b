"""RepoEnv, EnvPool, task sets and evaluate() through the installed package."""

import json
from pathlib import Path

import pytest

import frognano

TASKS = Path(__file__).resolve().parents[2] / "examples" / "tasks" / "sample.jsonl"


@pytest.fixture(scope="module")
def tasks():
    return frognano.load_tasks(TASKS)


def test_load_tasks_and_malformed_records(tasks, tmp_path):
    assert len(tasks) >= 12
    assert Path(tasks[0]["repo"]["path"]).is_absolute()
    bad = tmp_path / "bad.jsonl"
    good = json.dumps(tasks[0])
    broken = dict(tasks[0], fail_to_pass="not a list")
    bad.write_text(good + "\n" + json.dumps(broken) + "\n")
    with pytest.raises(frognano.TaskError, match=r":2: field `fail_to_pass`"):
        frognano.load_tasks(bad)
    with pytest.raises(ValueError):  # TaskError is a ValueError too
        frognano.load_tasks(bad)


def test_swe_bench_round_trip(tasks, tmp_path):
    record = frognano.to_swe_bench(tasks[0])
    assert record["instance_id"] == tasks[0]["id"]
    assert record["FAIL_TO_PASS"] == tasks[0]["fail_to_pass"]
    out = tmp_path / "swe.jsonl"
    out.write_text(json.dumps(record) + "\n")
    (back,) = frognano.load_tasks(out)
    assert back["id"] == tasks[0]["id"]
    assert back["bug_patch"] == tasks[0]["bug_patch"]


def test_gymnasium_style_episode(sandbox, tasks):
    task = tasks[0]
    with frognano.RepoEnv(sandbox, max_steps=10) as env:
        obs, info = env.reset(task)
        assert info["task_id"] == task["id"]
        assert "submit" in obs
        obs, reward, terminated, truncated, info = env.step("test")
        assert "failed" in obs and reward == 0.0 and not terminated and not truncated
        assert info["tests"]["failing"] == task["fail_to_pass"]
        obs, *_, info = env.step("where is the bug?")
        assert info["error"] and "No command found" in obs
        obs, *_ = env.step({"name": "view", "arguments": {"path": "tinyparse/config.py", "start_line": 1, "end_line": 3}})
        assert len(obs.splitlines()) == 3
        obs, reward, terminated, truncated, info = env.step("submit")
        assert terminated and reward == 0.0
        assert info["grading"]["resolved"] is False
        assert env.outcome["tool_errors"] == 1
        record = env.record()
        assert [s["tool"]["name"] if s.get("tool") else None for s in record["steps"]] == [
            "run_tests", None, "view", "submit"]
        with pytest.raises(frognano.EpisodeError):
            env.step("ls")
    with pytest.raises(frognano.EpisodeError):
        env.step("ls")
    env.close()  # twice is fine


def test_pool_steps_in_parallel(sandbox, tasks):
    pool = frognano.EnvPool(2, sandbox)
    assert pool.num_envs == 2
    first = pool.reset(tasks[:2])
    assert [info["task_id"] for _, info in first] == [t["id"] for t in tasks[:2]]
    results = pool.step(["ls", None])
    assert results[1] is None and "tinyparse/" in results[0][0]
    with pytest.raises(frognano.InvalidArgumentError):
        pool.step([42])
    # A None task leaves its environment's episode running.
    again = pool.reset([None, tasks[3]])
    assert again[0] is None and again[1][1]["task_id"] == tasks[3]["id"]
    assert pool.step(["ls", None])[0] is not None
    with pytest.raises(frognano.InvalidArgumentError):
        pool.reset([None, None, tasks[0]])


def test_evaluate_builtin_and_python_policies(sandbox, tasks, tmp_path):
    subset = tasks[:3]
    summary, records = frognano.evaluate(subset, "oracle", sandbox=sandbox, out=tmp_path / "r.jsonl")
    assert summary["resolved_rate"] == 1.0 and summary["episodes"] == 3
    assert len((tmp_path / "r.jsonl").read_text().splitlines()) == 3
    summary, _ = frognano.evaluate(subset, "noop", sandbox=sandbox)
    assert summary["resolved_rate"] == 0.0

    class ViewThenSubmit:
        """A drop-in Python policy: one view, then submit, with made-up log-probs."""

        def act(self, contexts):
            out = []
            for ctx in contexts:
                if ctx["history"]:
                    out.append("submit")
                else:
                    out.append({"action": {"name": "list", "arguments": {}}, "logprobs": [-0.5]})
            return out

    summary, records = frognano.evaluate(subset, ViewThenSubmit(), sandbox=sandbox)
    assert summary["mean_steps"] == 2.0
    assert records[0]["steps"][0]["logprobs"] == [-0.5]

    class Broken:
        def act(self, contexts):
            raise RuntimeError("boom")

    with pytest.raises(frognano.FrognanoError, match="boom"):
        frognano.evaluate(subset, Broken(), sandbox=sandbox)


def test_parse_action_and_tool_schemas():
    assert frognano.parse_action("view a.py 1-5") == {
        "name": "view", "arguments": {"path": "a.py", "start_line": 1, "end_line": 5}}
    with pytest.raises(frognano.ActionError, match="SEARCH"):
        frognano.parse_action("edit a.py\nno block")
    names = [t["function"]["name"] for t in frognano.tool_schemas()]
    assert "edit" in names and "submit" in names
    assert "submit" in frognano.tool_instructions()
