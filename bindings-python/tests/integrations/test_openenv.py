"""frognano.integrations.openenv against the real openenv-core (0.3.0): FrogNano environments
served by OpenEnv's own app (create_app, uvicorn) and driven over its WebSocket protocol by
OpenEnv's own clients (GenericEnvClient with plain dicts, the typed EnvClient subclass, the
sync wrapper): the reference fix applied through JSON tool-call commands resolving the task
with reward 1.0, concurrent sessions with their own episodes, seeded and named task choice,
the curriculum hearing graded episodes, the HTTP endpoints, clear errors, serve_openenv in
its own process, and the example script."""

import asyncio
import json
import subprocess
import sys
import urllib.request

import pytest

from integration_support import RecordingSource, TASKS, framework, run_example

openenv = framework("openenv", "openenv.core")

import frognano  # noqa: E402
from frognano.integrations import TaskSampler, fix_actions  # noqa: E402
from frognano.integrations.openenv import (FrogNanoAction, FrogNanoEnvClient, FrogNanoEnvironment,  # noqa: E402
                                           FrogNanoObservation, FrogNanoState, create_app, start_server)
from openenv.core import GenericEnvClient  # noqa: E402
from serving import free_port, wait_until_up  # noqa: E402


@pytest.fixture(scope="module")
def server(tasks):
    with start_server(tasks[:3], max_steps=12) as running:
        yield running


def _json(url, data=None):
    request = urllib.request.Request(url, data=None if data is None else json.dumps(data).encode(),
                                     headers={"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(request, timeout=60).read())


def test_openenvs_generic_client_resolves_a_task_with_the_reference_fix(server, tasks):
    task = tasks[1]
    with GenericEnvClient(base_url=server.url).sync() as env:
        result = env.reset(task_id=task["id"])
        assert not result.done and result.observation["task_id"] == task["id"]
        assert task["problem_statement"].splitlines()[0] in result.observation["text"]
        result = env.step({"command": "test"})
        assert result.observation["tool"] == "run_tests" and not result.done and result.reward == 0.0
        assert "failed" in result.observation["text"]
        for action in fix_actions(task):  # the reference fix, one JSON tool call per command
            result = env.step({"command": json.dumps(action)})
            assert result.observation["error"] is False and not result.done, result.observation["text"]
        result = env.step({"command": "submit"})
        assert result.done and result.reward == 1.0
        outcome = result.observation["outcome"]
        assert outcome["resolved"] is True and outcome["task_id"] == task["id"] and outcome["reward"] == 1.0
        state = env.state()
        assert state["task_id"] == task["id"] and state["resolved"] is True and state["done"] is True
        assert state["step_count"] == len(fix_actions(task)) + 2 and state["total_reward"] == 1.0
        # After the end the environment says so and grades nothing again.
        result = env.step({"command": "test"})
        assert result.done and result.reward == 0.0 and result.observation["outcome"] is None


def test_typed_clients_hold_concurrent_sessions_with_their_own_episodes(server, tasks):
    async def session(task_id, commands):
        async with FrogNanoEnvClient(base_url=server.url) as env:
            first = await env.reset(task_id=task_id)
            results = [await env.step(FrogNanoAction(command=c)) for c in commands]
            return first, results, await env.state()

    async def both():
        return await asyncio.gather(session(tasks[0]["id"], ["view README.md", "nonsense words", "test"]),
                                    session(tasks[2]["id"], ["test"]))

    (first_a, steps_a, state_a), (first_b, steps_b, state_b) = asyncio.run(both())
    assert isinstance(first_a.observation, FrogNanoObservation) and first_a.observation.task_id == tasks[0]["id"]
    assert first_b.observation.task_id == tasks[2]["id"]
    assert [s.observation.step for s in steps_a] == [1, 2, 3] and steps_b[0].observation.step == 1
    assert steps_a[0].observation.tool == "view" and steps_a[0].observation.error is False
    # A malformed command is an observation, not an error: the episode goes on.
    assert steps_a[1].observation.error is True and steps_a[1].observation.tool is None and not steps_a[1].done
    assert isinstance(state_a, FrogNanoState) and state_a.step_count == 3 and state_a.task_id == tasks[0]["id"]
    assert state_b.step_count == 1 and state_a.episode_id != state_b.episode_id


def test_seeds_name_tasks_reproducibly_and_unseeded_resets_take_turns(server, tasks):
    with FrogNanoEnvClient(base_url=server.url).sync() as env:
        seeded = [env.reset(seed=seed).observation.task_id for seed in (0, 1, 2, 0)]
        turns = [env.reset().observation.task_id for _ in range(3)]
    assert seeded[0] == seeded[3] and set(seeded) <= {t["id"] for t in tasks[:3]}
    assert sorted(turns) == sorted(t["id"] for t in tasks[:3])  # in turn: each task once


def test_the_curriculum_draws_the_tasks_and_hears_the_graded_episodes(tasks):
    source = RecordingSource(tasks[3:4])
    sampler = TaskSampler(source)
    with start_server(sampler=sampler, max_steps=2) as running:
        with FrogNanoEnvClient(base_url=running.url).sync() as env:
            assert env.reset().observation.task_id == tasks[3]["id"]
            result = env.step("submit")
            assert result.done and result.reward == 0.0 and result.observation.outcome["resolved"] is False
    outcome = result.observation.outcome
    assert source.outcomes == [{key: outcome[key] for key in ("task_id", "resolved", "reward")}]
    assert sampler.metrics()["sampler_observed"] == 1


def test_errors_of_a_request_reach_the_client_with_frognanos_message(server):
    with GenericEnvClient(base_url=server.url).sync() as env:
        with pytest.raises(RuntimeError, match="step before reset"):
            env.step({"command": "test"})
        with pytest.raises(RuntimeError, match="no task 'no-such-task'"):
            env.reset(task_id="no-such-task")
        with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):  # the action schema requires `command`
            env.step({"text": "test"})
        assert env.reset(seed=3).observation["task_id"]  # the session survives its errors


def test_http_endpoints(server):
    assert _json(server.url + "/health")["status"] == "healthy"
    schema = _json(server.url + "/schema")
    assert schema["action"]["required"] == ["command"] and "text" in schema["observation"]["properties"]
    metadata = _json(server.url + "/metadata")
    assert metadata["name"] == "frognano" and "submit" in metadata["readme_content"]
    # HTTP /reset is stateless in OpenEnv: a fresh environment answers and is closed.
    reset = _json(server.url + "/reset", {"seed": 1})
    assert reset["done"] is False and reset["observation"]["text"].startswith("Fix the bug")


def test_bad_settings_raise_clear_errors(monkeypatch, tasks):
    with pytest.raises(frognano.TaskError, match="repo"):
        create_app([{"id": "no-repo"}])
    with pytest.raises(frognano.InvalidArgumentError, match="empty"):
        create_app([])
    with pytest.raises(frognano.InvalidArgumentError, match="max_steps"):
        create_app(tasks[:1], max_steps=0)
    monkeypatch.delenv("FROGNANO_TASKS", raising=False)
    with pytest.raises(frognano.InvalidArgumentError, match="FROGNANO_TASKS"):
        create_app()
    with pytest.raises(frognano.EpisodeError, match="reset"):
        FrogNanoEnvironment(tasks[:1]).step(FrogNanoAction(command="test"))


def test_serve_openenv_serves_in_its_own_process():
    port = free_port()
    code = ("from frognano.integrations.openenv import serve_openenv; "
            f"serve_openenv({str(TASKS)!r}, host='127.0.0.1', port={port})")
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    try:
        wait_until_up(process, f"http://127.0.0.1:{port}/health", "serve_openenv", 120)
        with GenericEnvClient(base_url=f"http://127.0.0.1:{port}").sync() as env:
            result = env.reset(seed=0)
            assert result.observation["text"].startswith("Fix the bug")
            assert env.step({"command": "test"}).observation["tool"] == "run_tests"
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_example():
    out = run_example("openenv_env.py")
    assert "openenv: resolved 1/1 with the reference fix" in out
