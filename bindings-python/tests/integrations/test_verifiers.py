"""frognano.integrations.verifiers against the real verifiers 0.4 (its v1 API): episodes run by
verifiers' own machinery (Env.serving, run_slot, the interception server, EvalClient as the
model client) against `frognano serve` of the tiny model and against a scripted model server
that answers with tool calls; the `resolved` reward graded in the sandbox, the curriculum
hearing the outcomes, a FrogNano failure recorded on its own rollout as a verifiers error while
the others go on, clear errors for bad tasks, `vf-eval` loading an environment package by id,
and the example script. (The v0 adapter, for verifiers 0.3, is tested in
test_verifiers_v0.py.)"""

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from integration_support import RecordingSource, TASKS, framework, run_example

framework("verifiers")

import frognano  # noqa: E402
import verifiers.v1 as vf  # noqa: E402
from frognano.integrations import TaskSampler, fix_actions  # noqa: E402
from frognano.integrations import verifiers as fv  # noqa: E402
from serving import cli_path  # noqa: E402

pytestmark = pytest.mark.skipif(fv.API != "v1", reason="verifiers < 0.4 serves the v0 API")


class ScriptedModel:
    """An OpenAI-compatible chat server whose n-th reply in a conversation (n = the assistant
    messages already in the request) is script[n]: a string is a text reply, a list of
    actions is one reply of tool calls. It keeps every request body."""

    def __init__(self, script):
        self.script = script
        self.requests = []
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                scripted.requests.append(body)
                turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
                reply = scripted.script[min(turn, len(scripted.script) - 1)]
                if isinstance(reply, str):
                    message, finish = {"role": "assistant", "content": reply}, "stop"
                else:
                    calls = [{"id": f"call_{turn}_{i}", "type": "function",
                              "function": {"name": a["name"], "arguments": json.dumps(a["arguments"])}}
                             for i, a in enumerate(reply)]
                    message, finish = {"role": "assistant", "content": None, "tool_calls": calls}, "tool_calls"
                data = json.dumps({"id": f"chatcmpl-{len(scripted.requests)}", "object": "chat.completion",
                                   "created": 0, "model": body["model"],
                                   "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                                   "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data.encode())

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)

    @contextlib.contextmanager
    def serving(self):
        thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        finally:
            self.httpd.shutdown()
            self.httpd.server_close()


def _context(url, max_tokens=12):
    # verifiers' own eval client relays the interception server's requests to this endpoint.
    return vf.ModelContext(model="tiny", client=vf.EvalClientConfig(base_url=url, api_key_var="FROGNANO_UNUSED_KEY"),
                           sampling=vf.SamplingConfig(max_tokens=max_tokens))


def _run(env, ctx, tasks=None):
    """One episode per task of the taskset (or of `tasks`), as vf-eval runs them."""
    async def run():
        async with env.serving():
            slots = [slot for task in (tasks if tasks is not None else list(env.taskset)) for slot in env.slots(task)]
            return await asyncio.gather(*(env.run_slot(slot, ctx) for slot in slots))

    return asyncio.run(run())


def test_episodes_through_a_served_model_grade_in_the_sandbox_and_feed_the_curriculum(server, tasks):
    two = tasks[:2]
    source = RecordingSource(two)
    sampler = TaskSampler(source)
    env = fv.load_environment(two, max_turns=2, max_steps=5, sampler=sampler)
    assert isinstance(env, fv.FrogNanoEnv) and isinstance(env, vf.SingleAgentEnv)
    assert isinstance(env.taskset, fv.FrogNanoTaskset) and env.config.env_id == fv.TASKSET_ID
    items = list(env.taskset)
    assert [item.key for item in items] == [t["id"] for t in two] and [i.data.idx for i in items] == [0, 1]
    assert two[0]["problem_statement"].splitlines()[0] in items[0].data.prompt
    assert json.loads(items[0].data.task)["id"] == two[0]["id"] and items[0].data.max_steps == 5

    episodes = _run(env, _context(server))
    assert len(episodes) == 2
    traces = sorted((e.traces[0] for e in episodes), key=lambda t: t.task.data.idx)
    for episode in episodes:
        assert episode.ok and episode.errors == []
    for task, trace in zip(two, traces):
        assert trace.ok and trace.errors == []
        # max_turns=2 with a step budget of 5: verifiers refused the third turn.
        assert trace.stop_condition == "max_turns" and trace.num_turns == 2
        # The random model resolves nothing: the sandboxed grading says 0.0.
        assert trace.reward == 0.0 and trace.rewards["resolved"].score == 0.0
        assert 0.0 <= trace.metrics["valid_action_rate"] <= 1.0
        assert trace.state.actions == 2 and trace.state.outcome["task_id"] == task["id"]
        assert trace.state.outcome["resolved"] is False and trace.state.outcome["submitted"] is True
        assert trace.info["frognano"] == trace.state.outcome
        assert trace.agent.runtime.type == "subprocess"
        # The conversation the interception recorded: the task's prompt, then the model and the
        # environment's observation of its first action as the next user message.
        messages = trace.branches[-1].messages
        assert [m.role for m in messages[:3]] == ["user", "assistant", "user"] and messages[-1].role == "assistant"
        assert messages[0].content == trace.task.data.prompt
        assert trace.calls and all(call.model == "tiny" for call in trace.calls)
    # Every graded rollout reached the curriculum, as the environment graded it.
    assert sorted(o["task_id"] for o in source.outcomes) == sorted(t["id"] for t in two)
    assert all(o["resolved"] is False and o["reward"] == 0.0 for o in source.outcomes)
    assert sampler.metrics()["sampler_observed"] == 2


def test_the_true_fix_as_tool_calls_resolves_the_task(tasks):
    task = tasks[0]
    # First reply: the reference fix as tool calls (one call per edit); second: a text submit.
    model = ScriptedModel([fix_actions(task), "submit"])
    env = fv.load_environment([task], max_turns=4)
    with model.serving() as url:
        (episode,) = _run(env, _context(url))
    (trace,) = episode.traces
    assert trace.ok, trace.errors
    assert trace.reward == 1.0 and trace.rewards["resolved"].score == 1.0
    assert trace.metrics["valid_action_rate"] == 1.0
    assert trace.state.outcome["resolved"] is True and trace.state.actions == len(fix_actions(task)) + 1
    # The submit ended the episode, so the harness stopped without a third model call.
    assert trace.num_turns == 2 and trace.stop_condition == "agent_completed"
    # The model saw FrogNano's tools, and the environment's answers came back as tool messages.
    first, second = model.requests
    assert [tool["function"]["name"] for tool in first["tools"]] == [
        s["function"]["name"] for s in frognano.tool_schemas()]
    replies = [m for m in second["messages"] if m["role"] == "tool"]
    assert len(replies) == len(fix_actions(task)) and all(r["content"] for r in replies)
    assert [r["tool_call_id"] for r in replies] == [f"call_0_{i}" for i in range(len(replies))]


def test_text_only_mode_sends_no_tools_and_malformed_text_gets_the_error_observation(tasks):
    model = ScriptedModel(["I think the bug is somewhere, let me look"])
    env = fv.load_environment(tasks[:1], max_turns=2, max_steps=5, tool_calls=False)
    with model.serving() as url:
        (episode,) = _run(env, _context(url))
    (trace,) = episode.traces
    assert trace.ok and trace.stop_condition == "max_turns" and trace.state.actions == 2
    assert trace.metrics["valid_action_rate"] == 0.0 and trace.reward == 0.0
    assert all("tools" not in request for request in model.requests)
    observation = model.requests[1]["messages"][-1]
    assert observation["role"] == "user" and observation["content"].startswith("No command found")


def test_a_failing_task_fails_its_own_rollout_as_a_verifiers_error(tasks, tmp_path):
    # The second task's repository is a copy that vanishes after the tasks are planned: its
    # setup raises RepoNotFoundError, which verifiers records on that rollout as a TaskError.
    repo = tmp_path / "repo"
    good = tasks[0]
    source = frognano.load_tasks(TASKS)[1]
    shutil.copytree(TASKS.parent / source["repo"]["path"], repo)
    doomed = dict(source, repo={"kind": "path", "path": str(repo)})
    env = fv.load_environment([good, doomed], max_turns=2)
    planned = list(env.taskset)
    shutil.rmtree(repo)
    with ScriptedModel(["submit"]).serving() as url:
        episodes = _run(env, _context(url), planned)
    by_task = {e.task.key: e.traces[0] for e in episodes}
    ok, failed = by_task[good["id"]], by_task[doomed["id"]]
    assert ok.ok and ok.reward == 0.0 and ok.state.outcome["submitted"] is True
    assert not failed.ok and failed.last_error.type == "TaskError"
    assert "RepoNotFoundError" in failed.last_error.message and doomed["id"] in failed.last_error.message
    assert failed.stop_condition == "task_error"


def test_frognano_failures_map_to_verifiers_error_types():
    assert isinstance(fv.verifiers_error(frognano.SandboxFailure("wasm trap"), "step 1"), vf.SandboxError)
    assert isinstance(fv.verifiers_error(frognano.SetupError("no asset"), "setup"), vf.SandboxError)
    error = fv.verifiers_error(frognano.TaskError("bug does not apply"), "opening task 'x'")
    assert isinstance(error, vf.TaskError) and str(error) == "opening task 'x': TaskError: bug does not apply"
    assert all(issubclass(kind, vf.RolloutError) for kind in (vf.SandboxError, vf.TaskError))


def test_bad_tasks_raise_clear_errors(monkeypatch, tasks):
    with pytest.raises(frognano.TaskError, match="repo"):
        fv.load_environment([{"id": "no-repo"}])
    with pytest.raises(frognano.InvalidArgumentError, match="empty"):
        fv.load_environment([])
    with pytest.raises(frognano.InvalidArgumentError, match="max_steps"):
        fv.load_environment(tasks[:1], max_steps=0)
    monkeypatch.delenv("FROGNANO_TASKS", raising=False)
    with pytest.raises(frognano.InvalidArgumentError, match="FROGNANO_TASKS"):
        fv.load_environment()
    monkeypatch.setenv("FROGNANO_TASKS", str(TASKS))
    env = fv.load_environment(max_turns=1)
    assert [t["id"] for t in env.taskset.tasks] == [t["id"] for t in tasks]
    assert env.config.agent.max_turns == 1 and env.taskset.config.max_steps == 1


def test_vf_eval_loads_an_environment_package_by_id(server, tmp_path):
    # What an installed `frognano-env` package holds; verifiers imports the id as a module.
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "frognano_env.py").write_text(
        "from frognano.integrations.verifiers import *  # noqa: F401,F403\n"
        "from frognano.integrations.verifiers import __all__  # noqa: F401\n")
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(package), os.environ.get("PYTHONPATH", "")]))
    command = [sys.executable, "-c", "from verifiers.v1.cli.eval.main import main; main()", "frognano-env",
               "--env.taskset.tasks", str(TASKS), "-n", "2", "--env.agent.max-turns", "2",
               "-m", "tiny", "--client.base-url", server, "--client.api-key-var", "FROGNANO_UNUSED_KEY",
               "--sampling.max-tokens", "12", "--no-rich", "--push", "false", "--output-dir", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (traces_file,) = out.glob("*/traces.jsonl")
    traces = [json.loads(line) for line in traces_file.read_text().splitlines()]
    episode_traces = [trace for episode in traces for trace in episode["traces"]]
    assert len(episode_traces) == 2
    for trace in episode_traces:
        assert trace["ok"] and trace["stop_condition"] == "max_turns"
        assert trace["rewards"]["resolved"]["score"] == 0.0
        assert trace["agent"]["config"]["harness"]["id"] == fv.TASKSET_ID
        assert 0.0 <= trace["metrics"]["valid_action_rate"] <= 1.0 and len(trace["calls"]) == 2
        # The graded outcome rides in the trace's info, which traces.jsonl keeps.
        assert trace["info"]["frognano"]["submitted"] is True and trace["info"]["frognano"]["resolved"] is False


def test_example(monkeypatch):
    monkeypatch.setenv("FROGNANO_CLI", str(cli_path()))
    out = run_example("verifiers_env.py")
    assert "verifiers (v1): 2 rollouts" in out and "sampler observed 2" in out
