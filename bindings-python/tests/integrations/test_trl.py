"""frognano.integrations.trl against the real TRL GRPOTrainer (CPU, the tiny model): a training
step through environment_factory and one through rollout_func with rewards from sandboxed test
runs, the token-exactness of the rollouts, the tool schemas, and bad input."""

import json
import os
import pickle
import queue
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from integration_support import framework, run_example

trl = framework("trl")

import torch  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402
from transformers.utils import get_json_schema  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402
from trl.chat_template_utils import add_response_schema, parse_response, qwen2_5_chat_template  # noqa: E402

import frognano  # noqa: E402
from frognano.integrations import TaskSampler, task_json  # noqa: E402
from frognano.integrations.trl import (  # noqa: E402
    FrogNanoBatchedToolEnv,
    FrogNanoToolEnv,
    frognano_reward,
    grade_environments,
    local_model_generate,
    make_rollout_func,
    task_dataset,
)

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


def config(tmp_path, **overrides):
    options = dict(output_dir=str(tmp_path / "out"), max_steps=1, per_device_train_batch_size=2, num_generations=2,
                   max_completion_length=16, bf16=False, use_cpu=True, report_to="none", logging_steps=1,
                   gradient_checkpointing=False, save_strategy="no", seed=0)
    options.update(overrides)
    return GRPOConfig(**options)


@pytest.fixture(scope="module")
def task(tasks):
    return tasks[0]


def reference_logprobs(model, prompt_ids, completion_ids):
    """log p(completion token | everything before it) under `model`, temperature 1."""
    ids = torch.tensor([prompt_ids + completion_ids])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1:-1].float()
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(completion_ids).unsqueeze(-1)).squeeze(-1)


def assert_token_exact(out, rollouts, tokenizer, model=None, atol=1e-4):
    """completion_ids = the sampled ids of each turn (env_mask 1) and the observation tokens
    between them (env_mask 0, logprob 0.0); with `model`, the log-probs are that model's."""
    n = len(out["prompt_ids"])
    assert len(out["completion_ids"]) == len(out["logprobs"]) == len(out["env_mask"]) == len(rollouts) == n
    for i, rollout in enumerate(rollouts):
        ids, lps, mask = out["completion_ids"][i], out["logprobs"][i], out["env_mask"][i]
        assert len(ids) == len(lps) == len(mask)
        expected_ids, expected_mask, expected_lps = [], [], []
        for turn in rollout["turns"]:
            expected_ids += turn["token_ids"] + turn["observation_ids"]
            expected_mask += [1] * len(turn["token_ids"]) + [0] * len(turn["observation_ids"])
            expected_lps += turn["logprobs"] + [0.0] * len(turn["observation_ids"])
            if turn["observation_ids"]:
                # The observation tokens are the environment's answer, rendered as the next user turn.
                text = tokenizer.decode(turn["observation_ids"])
                assert turn["observation"].strip() in text and "<|im_start|>user" in text
                assert text.endswith("<|im_start|>assistant\n")
        assert ids == expected_ids and mask == expected_mask and lps == expected_lps
        assert mask[-1] == 1  # a completion ends with the model's own tokens
        if model is not None:
            reference = reference_logprobs(model, out["prompt_ids"][i], ids)
            model_positions = torch.tensor(mask).bool()
            assert torch.allclose(torch.tensor(lps)[model_positions], reference[model_positions], atol=atol)


def test_rollout_func_trains_a_step_token_exact(tmp_path, task, tiny_model):
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    sampler = TaskSampler([task])
    rollout = make_rollout_func([task], max_turns=3, max_turn_tokens=8, observation_chars=200, sampler=sampler)
    outputs = []

    def recording_rollout(prompts, trainer):
        outputs.append(rollout(prompts, trainer))
        return outputs[-1]

    trainer = GRPOTrainer(model=model, reward_funcs=frognano_reward, processing_class=tokenizer,
                          args=config(tmp_path, max_completion_length=256), train_dataset=task_dataset([task]),
                          rollout_func=recording_rollout)
    trainer.train()

    # The step ran and logged its loss and the FrogNano reward.
    assert trainer.state.global_step == 1
    logged = trainer.state.log_history[0]
    assert "loss" in logged and "rewards/frognano_reward/mean" in logged
    (out,) = outputs
    rewards = out["frognano_reward"]
    assert len(rewards) == 2 and logged["rewards/frognano_reward/mean"] == pytest.approx(sum(rewards) / 2)
    assert out["task_id"] == [task["id"], task["id"]]  # a group shares its task

    # The rewards come from the sandboxed grading of each final repository.
    assert sampler.metrics()["sampler_observed"] == 2
    for result in rollout.last_rollouts:
        assert result["outcome"]["submitted"] and result["outcome"]["task_id"] == task["id"]
        assert result["grading"]["tests"] and result["grading"]["run_outcome"] == "failed"
        assert {t["id"] for t in result["grading"]["tests"]} >= set(task["fail_to_pass"])
        assert result["reward"] == 0.0 and not result["resolved"]  # random text does not fix the bug

    # Multi-turn and token-exact: observations between turns carry env_mask 0, and the log-probs
    # are the untrained model's at the sampled ids in exactly this context.
    assert any(turn["observation_ids"] for result in rollout.last_rollouts for turn in result["turns"])
    assert all(len(result["turns"]) >= 2 for result in rollout.last_rollouts)
    assert all(0 in mask for mask in out["env_mask"])
    assert all(len(ids) <= 256 for ids in out["completion_ids"])
    assert_token_exact(out, rollout.last_rollouts, tokenizer, AutoModelForCausalLM.from_pretrained(tiny_model))


def test_rollout_with_a_local_model_backend(tmp_path, task, tiny_model):
    """The pluggable backend: frognano.LocalModel (ONNX Runtime) samples, the ids and its log-probs
    travel unchanged and agree with the same weights in PyTorch."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    dataset = task_dataset([task])
    trainer = GRPOTrainer(model=model, reward_funcs=frognano_reward, processing_class=tokenizer,
                          args=config(tmp_path, max_completion_length=200), train_dataset=dataset,
                          rollout_func=lambda prompts, trainer: {})
    local = frognano.LocalModel(tiny_model, intra_threads=1)
    rollout = make_rollout_func(dataset, generate=local_model_generate(local, seed=1), max_turns=2,
                                max_turn_tokens=6, observation_chars=200)
    out = rollout([dataset[0]["prompt"]] * 2, trainer)
    assert [len(r["turns"]) for r in rollout.last_rollouts] == [2, 2]
    assert_token_exact(out, rollout.last_rollouts, tokenizer, model, atol=2e-3)
    assert frognano_reward(completions=[None, None], **{k: out[k] for k in ("frognano_reward", "task_id")},
                           task=[task_json(task)] * 2) == out["frognano_reward"]


def test_environment_factory_trains_a_step(tmp_path, task, tiny_model):
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    # The tiny tokenizer's ChatML template has no tool calls; TRL needs one it can render and parse.
    tokenizer.chat_template = qwen2_5_chat_template
    sampler = TaskSampler([task])
    trainer = GRPOTrainer(model=model, processing_class=tokenizer,
                          args=config(tmp_path, max_tool_calling_iterations=2),
                          train_dataset=task_dataset([task], prompt=""),
                          environment_factory=FrogNanoToolEnv.factory(sampler=sampler, max_steps=4,
                                                                      observation_chars=800))
    names = sorted(schema["function"]["name"] for schema in frognano.tool_schemas())
    assert sorted(tool.__name__ for tool in trainer.tools) == names
    trainer.train()

    assert trainer.state.global_step == 1
    logged = trainer.state.log_history[0]
    assert "loss" in logged and logged["rewards/FrogNanoToolEnv/mean"] == 0.0
    # Each rollout's reward is the grading of its own environment's repository, told to the sampler.
    assert len(trainer.environments) == 2 and sampler.metrics()["sampler_observed"] == 2
    for env in trainer.environments:
        assert env.task["id"] == task["id"] and env.outcome["submitted"] and not env.resolved
        assert env.grading["run_outcome"] == "failed" and env.grading["tests"]


class TimedEnv(FrogNanoBatchedToolEnv):
    """Records when each grading (a sandboxed test run) starts and ends."""

    gradings = []

    def _grade(self):
        start = time.monotonic()
        try:
            return super()._grade()
        finally:
            TimedEnv.gradings.append((start, time.monotonic()))


def test_batched_reward_grades_the_batch_concurrently(tmp_path, task, tiny_model):
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    tokenizer.chat_template = qwen2_5_chat_template
    factory = TimedEnv.factory(max_steps=4, observation_chars=800)
    assert FrogNanoToolEnv.factory(batched_reward=True)().__class__ is FrogNanoBatchedToolEnv
    TimedEnv.gradings.clear()
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=grade_environments,
                          args=config(tmp_path, max_tool_calling_iterations=1, per_device_train_batch_size=4,
                                      num_generations=4),
                          train_dataset=task_dataset([task], prompt=""), environment_factory=factory)
    trainer.train()
    logged = trainer.state.log_history[0]
    # One reward column, the batched one: the environments add none of their own.
    assert logged["rewards/grade_environments/mean"] == 0.0 and not any("FrogNanoToolEnv" in k for k in logged)
    assert len(trainer.environments) == 4 and all(env.outcome["submitted"] for env in trainer.environments)
    assert len(TimedEnv.gradings) == 4
    # The test runs overlapped, as many at once as the sandbox has workers (GRPOTrainer alone would
    # run them one after the other).
    peak = max(sum(start <= t < end for start, end in TimedEnv.gradings) for t, _ in TimedEnv.gradings)
    assert peak == min(4, frognano.integrations.shared_sandbox().workers), TimedEnv.gradings
    with pytest.raises(frognano.InvalidArgumentError, match="batched_reward"):
        grade_environments(prompts=["p"], completions=["c"])


def test_tool_env_and_its_factory_pickle(task, sandbox):
    factory = FrogNanoToolEnv.factory(sandbox=sandbox, max_steps=3, sampler=TaskSampler([task]))
    copy = pickle.loads(pickle.dumps(factory))
    assert copy.sandbox is not sandbox and copy.sandbox.workers == sandbox.workers and copy.max_steps == 3
    env = copy()
    assert type(env) is FrogNanoToolEnv and env._sandbox is copy.sandbox
    assert task["problem_statement"].strip() in env.reset(prompt=[{"role": "user", "content": ""}])
    with pytest.raises(TypeError, match="between episodes"):
        pickle.dumps(env)
    assert env.get_reward() == 0.0  # graded: the episode is over
    again = pickle.loads(pickle.dumps(env))
    assert type(again) is FrogNanoToolEnv and again.task is None and again._max_steps == 3
    batched = pickle.loads(pickle.dumps(FrogNanoToolEnv.factory(batched_reward=True)))()
    assert type(batched) is FrogNanoBatchedToolEnv and batched.get_reward is None


class CompletionsServer:
    """A scripted policy behind vLLM's /v1/completions (token ids in, token ids and log-probs out),
    where AsyncGRPOTrainer's rollout worker sends its requests: the first rollout's first turn
    calls the edit that fixes the bug, the others' a harmless view; after a tool result, it
    stops without a tool call."""

    def __init__(self, tokenizer, fix_call, other_call):
        self.tokenizer, self.lock, self.first_turns = tokenizer, threading.Lock(), 0
        self.fix, self.other = fix_call, other_call
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self._json({"data": [{"id": "tiny", "max_model_len": 4096}]})

            def do_POST(self):
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                self._json(server.complete(request))

            def _json(self, body):
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def complete(self, request):
        shown = self.tokenizer.decode(request["prompt"])
        if "<tool_response>" in shown:
            text = "Done.<|im_end|>"
        else:
            with self.lock:
                call = self.fix if self.first_turns == 0 else self.other
                self.first_turns += 1
            text = f"<tool_call>\n{json.dumps(call)}\n</tool_call><|im_end|>"
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        return {"choices": [{"index": 0, "text": text, "token_ids": ids, "finish_reason": "stop",
                             "logprobs": {"token_logprobs": [-0.5] * len(ids)}}]}

    def close(self):
        self.httpd.shutdown()


def test_async_grpo_rollout_worker_runs_the_pickled_env_in_its_process(task, tiny_model, monkeypatch):
    from trl.experimental.async_grpo import async_rollout_worker as worker_module

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    tokenizer.chat_template = qwen2_5_chat_template
    fix = {"name": "edit", "arguments": {"path": "tinyparse/config.py",
                                         "search": "if depth >= _MAX_INTERPOLATION_DEPTH:",
                                         "replace": "if depth > _MAX_INTERPOLATION_DEPTH:"}}
    view = {"name": "view", "arguments": {"path": "tinyparse/config.py", "start_line": 1, "end_line": 3}}
    server = CompletionsServer(tokenizer, fix, view)
    # AsyncGRPOTrainer's own rollout worker (what its trainer starts on rank 0). It checks for vLLM only
    # because the trainer talks to a vLLM server; here the server is the scripted one above.
    monkeypatch.setattr(worker_module, "is_vllm_available", lambda: True)
    worker = worker_module.AsyncRolloutWorker(
        model_name="tiny", dataset=task_dataset([task], prompt=""), reward_funcs=[], processing_class=tokenizer,
        eos_token_ids=[tokenizer.eos_token_id], environment_factory=FrogNanoToolEnv.factory(max_steps=4),
        num_generations=2, max_inflight_tasks=2, vllm_server_url=server.url, max_tokens=96,
        max_tool_calling_iterations=2, child_ready_timeout=240)
    try:
        worker.start()  # pickles the factory into a spawned process
        samples = [worker.rollout_buffer.get(timeout=240) for _ in range(2)]
    finally:
        worker.stop()
        server.close()
    # Each rollout's reward is its own environment's sandboxed grading, done in the worker's process.
    rewards = sorted(sample.metrics["rewards/FrogNanoToolEnv"] for sample in samples)
    assert rewards == [0.0, 1.0]
    assert all(sample.metrics["tools/call_frequency"] == 1.0 for sample in samples)
    assert {sample.group_id for sample in samples} == {samples[0].group_id}
    tool_turns = [m for sample in samples for m in sample.completion if m["role"] == "tool"]
    assert any(turn["content"].startswith("Edited tinyparse/config.py") for turn in tool_turns), tool_turns


def test_tool_methods_follow_the_tool_protocol(task, tiny_model):
    env = FrogNanoToolEnv(max_steps=12)
    schemas = {s["function"]["name"]: s["function"] for s in frognano.tool_schemas()}
    kinds = {"string": "string", "integer": "integer", "array": "array"}
    for name, schema in schemas.items():
        ours = get_json_schema(getattr(env, name))["function"]  # what TRL puts in the prompt
        assert ours["name"] == name and ours["description"] == schema["description"]
        theirs = schema["parameters"]
        assert set(ours["parameters"]["properties"]) == set(theirs["properties"])
        assert set(ours["parameters"].get("required", [])) == set(theirs.get("required", []))
        for arg, spec in theirs["properties"].items():
            assert ours["parameters"]["properties"][arg]["type"] == kinds[spec["type"]]

    # reset returns the opening observation unless the prompt already holds it.
    observation = env.reset(task=task_json(task))
    assert task["problem_statement"].strip() in observation
    assert env.reset(**task_dataset([task])[0]) is None
    appended = env.reset(task=task_json(task), prompt=[{"role": "user", "content": "Fix it."}])
    assert appended.startswith("\n\nFix the bug")

    # A tool call as TRL parses it from the model's text and dispatches it.
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    tokenizer.chat_template = qwen2_5_chat_template
    add_response_schema(tokenizer)
    call = {"name": "view", "arguments": {"path": "tinyparse/config.py", "start_line": 128, "end_line": 131}}
    text = f"<tool_call>\n{json.dumps(call)}\n</tool_call><|im_end|>"
    tools = [getattr(env, name) for name in schemas]
    prefix = tokenizer.apply_chat_template([{"role": "user", "content": "Fix it."}], tools=tools, tokenize=True,
                                           add_generation_prompt=True, return_dict=False)
    (parsed,) = parse_response(tokenizer, tokenizer.encode(text), prefix=prefix, tools=tools)["tool_calls"]
    shown = getattr(env, parsed["function"]["name"])(**parsed["function"]["arguments"])
    assert "if depth >= _MAX_INTERPOLATION_DEPTH:" in shown and "130" in shown

    # Malformed arguments get the environment's error observation, not an exception.
    assert env.view() == "view: missing argument `path`."
    assert env.view(path=5) == "view: `path` must be a string, got 5."
    assert "must be" in env.view(path="README.md", start_line="two")
    assert env.edit(search="x", replace="y") == "edit: missing argument `path`."
    assert env.insert(path="README.md", line=1) == "insert: missing argument `text`."
    assert "must be a non-negative integer" in env.insert(path="README.md", line="a", text="t")

    # The real fix through the tools resolves the task, graded by the sandboxed tests.
    report = env.run_tests(tests=task["fail_to_pass"])
    assert "fail" in report.lower()
    env.edit(path="tinyparse/config.py", search="if depth >= _MAX_INTERPOLATION_DEPTH:",
             replace="if depth > _MAX_INTERPOLATION_DEPTH:")
    assert env.get_reward() == 1.0 and env.resolved and env.get_reward() == 1.0
    assert env.grading["resolved"] and env.submit() == "The episode has ended."


def test_bad_rows_and_prompts(task):
    env = FrogNanoToolEnv()
    with pytest.raises(frognano.TaskError, match="`task` column"):
        env.reset(prompt=[{"role": "user", "content": "hi"}])
    with pytest.raises(frognano.TaskError, match="not JSON"):
        env.reset(task='{"id": "x", "repo": ')
    with pytest.raises(frognano.TaskError, match="`repo`"):
        env.reset(task=json.dumps({"id": "x"}))
    with pytest.raises(frognano.EpisodeError):
        env.get_reward()
    with pytest.raises(frognano.TaskError):
        task_dataset([{"id": "no-repo"}])
    rollout = make_rollout_func([task])
    with pytest.raises(frognano.TaskError, match="not one of the 1 tasks"):
        rollout.task_for([{"role": "user", "content": "an unknown task"}])
    with pytest.raises(frognano.InvalidArgumentError, match="make_rollout_func"):
        frognano_reward(prompts=["p"], completions=["c"])
    with pytest.raises(frognano.TaskError, match="for a row of task"):
        frognano_reward(completions=["c"], frognano_reward=[1.0], task_id=["other"], task=[task_json(task)])
    # A sampler feeds rows without a task (TRL's placeholder rows when the environment owns the data).
    drawn = FrogNanoToolEnv(sampler=TaskSampler([task]))
    assert task["problem_statement"].strip() in drawn.reset(prompt=[{"role": "user", "content": ""}])
    with pytest.raises(frognano.TaskError):
        drawn.reset(task="not json")


def test_example():
    out = run_example("trl_grpo.py")
    line = out.strip().splitlines()[-1]
    assert line.startswith("trl rollout_func: step 1, 2 rollouts of ")
    assert "resolved 0/2" in line and "outcomes observed 2" in line
