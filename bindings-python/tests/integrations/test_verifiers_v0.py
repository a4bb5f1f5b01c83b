"""frognano.integrations.verifiers under verifiers 0.3 (tested with 0.3.1, its classic v0 API):
rollouts and evaluation driven by verifiers itself through an AsyncOpenAI client talking to
`frognano serve` of the tiny model, rewards from the sandboxed grading, the curriculum hearing
the outcomes, the task's true fix applied through the environment grading 1.0, the
environment's error observation for malformed text, a FrogNano failure recorded on its own
rollout as a verifiers error, clear errors for bad tasks, and the example script.

The integration environment pins verifiers 0.4, whose v1 API test_verifiers.py tests; this
module runs where verifiers 0.3 is installed and skips elsewhere."""

import asyncio
import json
import shutil
from importlib.metadata import version

import pytest

from integration_support import REQUIRED, RecordingSource, TASKS, run_example

try:
    import verifiers as vf
except ImportError as error:
    if REQUIRED:
        raise
    pytest.skip(f"verifiers is not installed ({error})", allow_module_level=True)
LEGACY_VERSION = "0.3.1"
if not version("verifiers").startswith("0.3."):
    pytest.skip(f"verifiers {version('verifiers')} is installed; the v0 adapter is tested with {LEGACY_VERSION}",
                allow_module_level=True)
assert version("verifiers") == LEGACY_VERSION, f"verifiers {version('verifiers')} is not the tested {LEGACY_VERSION}"

import frognano  # noqa: E402
from frognano.integrations import TaskSampler, TextEpisode, fix_actions  # noqa: E402
from frognano.integrations import verifiers as fv  # noqa: E402
from frognano.integrations.verifiers import FrogNanoEnv, dataset_rows, load_environment  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402
from serving import cli_path, free_port  # noqa: E402


def _client(url):
    # verifiers 0.3.1 takes a raw AsyncOpenAI client wrapped in its chat-completions adapter.
    return vf.OpenAIChatCompletionsClient(AsyncOpenAI(base_url=url, api_key="unused"))


def _text(message):
    return message["content"] if isinstance(message, dict) else message.content


def _role(message):
    return message["role"] if isinstance(message, dict) else message.role


def test_evaluate_through_a_served_model_grades_in_the_sandbox_and_feeds_the_curriculum(server, tasks):
    two = tasks[:2]
    source = RecordingSource(two)
    sampler = TaskSampler(source)
    # The verifiers loader imports the module by name and calls its load_environment.
    env = vf.load_environment("frognano.integrations.verifiers", tasks=two, max_turns=2, sampler=sampler)
    assert fv.API == "v0" and isinstance(env, FrogNanoEnv) and isinstance(env, vf.MultiTurnEnv)
    rows = env.get_eval_dataset()
    assert len(rows) == 2 and {"prompt", "info", "answer", "task_id", "example_id"} <= set(rows.column_names)
    assert json.loads(rows[0]["info"])["id"] == two[0]["id"]
    opening = rows[0]["prompt"][0]
    assert opening["role"] == "user" and two[0]["problem_statement"].splitlines()[0] in opening["content"]

    results = asyncio.run(env.evaluate(_client(server), "tiny", sampling_args={"max_tokens": 12},
                                       num_examples=2, rollouts_per_example=1))
    outputs = results["outputs"]
    assert len(outputs) == 2
    for output in outputs:
        assert output["error"] is None
        # The random model resolves nothing: the sandboxed grading says 0.0.
        assert output["reward"] == 0.0
        assert output["metrics"]["resolved"] == 0.0
        assert 0.0 <= output["metrics"]["valid_action_rate"] <= 1.0
        assert output["metrics"]["num_turns"] == 2
        assert output["stop_condition"] in ("max_turns_reached", "episode_done", "has_final_env_response")
        roles = [_role(m) for m in output["completion"]]
        # assistant / observation turns, the last turn's action applied and answered too.
        assert roles[:3] == ["assistant", "user", "assistant"] and roles[-1] == "user"
        assert all(isinstance(_text(m), str) and _text(m) for m in output["completion"] if _role(m) == "user")
    # Every graded rollout reached the curriculum, as the environment graded it.
    assert sorted(o["task_id"] for o in source.outcomes) == sorted(t["id"] for t in two)
    assert all(o["resolved"] is False and o["reward"] == 0.0 for o in source.outcomes)
    assert sampler.metrics()["sampler_observed"] == 2


def test_a_rollout_cut_short_by_the_model_server_is_graded_but_not_reported(tasks):
    source = RecordingSource(tasks[:1])
    env = load_environment(tasks[:1], max_turns=2, sampler=TaskSampler(source))
    # Nothing listens there: verifiers records a ModelError and stops the rollout.
    client = vf.OpenAIChatCompletionsClient(
        AsyncOpenAI(base_url=f"http://127.0.0.1:{free_port()}/v1", api_key="unused", max_retries=0))
    results = asyncio.run(env.evaluate(client, "tiny", sampling_args={"max_tokens": 4}, num_examples=1,
                                       on_start=lambda *a: None, on_progress=lambda *a: None))
    (output,) = results["outputs"]
    assert output["error"]["error"] == "ModelError" and output["stop_condition"] == "has_error"
    assert output["reward"] == 0.0 and output["metrics"]["num_turns"] == 0
    assert source.outcomes == []  # the curriculum hears nothing of an infrastructure failure


async def _state(env, server):
    row = env.get_dataset()[0]
    state = await env.init_state(row, _client(server), "tiny")
    return await env.setup_state(state)


def test_the_true_fix_applied_through_env_actions_grades_one(server, tasks):
    task = tasks[0]
    source = RecordingSource([task])
    env = load_environment([task], max_turns=4, sampler=TaskSampler(source))

    async def run():
        state = await _state(env, server)
        messages = list(state["prompt"])
        for action in fix_actions(task):  # the reference fix as JSON tool calls in the reply text
            messages.append(vf.AssistantMessage(content=json.dumps(action)))
            reply = await env.env_response(messages, state)
            assert len(reply) == 1 and _role(reply[0]) == "user"
            assert not state["frognano_episode"].done and state["final_env_response"] is None
            messages.extend(reply)
        # A submit ends the episode: the rollout stops without asking the model again.
        messages.append(vf.AssistantMessage(content="submit"))
        await env.env_response(messages, state)
        assert state["final_env_response"] is not None and await env.episode_done(state)
        state["completion"] = messages[len(state["prompt"]):]
        await env.rubric.score_rollout(state)
        await env.rubric.cleanup(state)
        return state

    state = asyncio.run(run())
    assert state["reward"] == 1.0
    assert state["metrics"]["resolved"] == 1.0
    assert state["metrics"]["valid_action_rate"] == 1.0
    assert state["frognano_outcome"]["resolved"] is True
    assert source.outcomes == [{"task_id": task["id"], "resolved": True, "reward": 1.0}]


def test_malformed_assistant_text_gets_the_environments_error_observation(server, tasks):
    env = load_environment(tasks[:1], max_turns=3)
    garbage = "I think the bug is somewhere, let me look"
    episode = TextEpisode(tasks[0])
    expected, _, _, info = episode.step(garbage)
    episode.close()
    assert info["error"]

    async def run():
        state = await _state(env, server)
        messages = list(state["prompt"]) + [vf.AssistantMessage(content=garbage)]
        reply = await env.env_response(messages, state)
        still_open = not await env.episode_done(state)
        await env.rubric.score_rollout(state)  # nothing fixed: graded 0.0
        await env.rubric.cleanup(state)
        return reply, still_open, state

    reply, still_open, state = asyncio.run(run())
    assert _text(reply[0]) == expected and expected.startswith("No command found")
    assert still_open
    assert state["reward"] == 0.0 and state["metrics"]["valid_action_rate"] == 0.0


def test_a_failing_task_fails_its_own_rollout_as_a_verifiers_error(server, tasks, tmp_path):
    # The second task's repository is a copy that vanishes after the dataset is built: its
    # setup raises RepoNotFoundError, which the rollout loop records as a vf.Error.
    repo = tmp_path / "repo"
    shutil.copytree(TASKS.parent / tasks[1]["repo"]["path"], repo)
    doomed = dict(tasks[1], repo={"kind": "path", "path": str(repo)})
    env = load_environment([tasks[0], doomed], max_turns=2)
    env.get_eval_dataset()  # the prompts open each repository once
    shutil.rmtree(repo)
    results = asyncio.run(env.evaluate(_client(server), "tiny", sampling_args={"max_tokens": 4}, num_examples=2,
                                       on_start=lambda *a: None, on_progress=lambda *a: None))
    by_task = {json.loads(o["info"])["id"] if isinstance(o["info"], str) else o["info"]["id"]: o
               for o in results["outputs"]}
    ok, failed = by_task[tasks[0]["id"]], by_task[doomed["id"]]
    assert ok["error"] is None and ok["metrics"]["num_turns"] == 2
    assert failed["error"]["error"] == "Error" and failed["stop_condition"] == "has_error"
    assert failed["reward"] == 0.0 and failed["metrics"]["num_turns"] == 0


def test_frognano_failures_map_to_verifiers_error_types():
    assert isinstance(fv.verifiers_error(frognano.SandboxFailure("wasm trap"), "step 1"), vf.SandboxError)
    error = fv.verifiers_error(frognano.TaskError("bug does not apply"), "opening the rollout's task")
    assert type(error) is vf.Error and "TaskError: bug does not apply" in str(error)


def test_bad_tasks_raise_clear_errors(monkeypatch, tasks):
    with pytest.raises(frognano.TaskError, match="repo"):
        load_environment([{"id": "no-repo"}])
    with pytest.raises(frognano.InvalidArgumentError, match="empty"):
        load_environment([])
    with pytest.raises(frognano.TaskError):
        load_environment(["not json"])
    monkeypatch.delenv("FROGNANO_TASKS", raising=False)
    with pytest.raises(frognano.InvalidArgumentError, match="FROGNANO_TASKS"):
        load_environment()
    monkeypatch.setenv("FROGNANO_TASKS", str(TASKS))
    env = load_environment(max_turns=1)
    assert [t["id"] for t in env.tasks] == [t["id"] for t in tasks]
    # A dataset row that carries no task fails setup with a verifiers error (which verifiers
    # records on the rollout) caused by FrogNano's TaskError, not a silent 0.0.
    with pytest.raises(vf.Error, match="carries no task") as raised:
        asyncio.run(env.setup_state(vf.State(input={"prompt": [], "info": {}, "example_id": 0})))
    assert isinstance(raised.value.__cause__, frognano.TaskError)
    assert dataset_rows(tasks[:1])[0]["task_id"] == tasks[0]["id"]


def test_example(monkeypatch):
    monkeypatch.setenv("FROGNANO_CLI", str(cli_path()))
    out = run_example("verifiers_env.py")
    assert "verifiers (v0): 2 rollouts" in out and "sampler observed 2" in out
