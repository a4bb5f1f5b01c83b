"""frognano.integrations.verl against the installed verl: its AgentLoopWorker, registry,
RLHFDataset, DataProto and pydantic output types, over the tiny local model; rewards come from
the tasks' tests in the sandbox."""

import asyncio
import os
import pickle
import re

import pytest

from integration_support import framework, run_example

verl = framework("verl")

import hydra  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from verl.experimental.agent_loop.agent_loop import (  # noqa: E402
    AgentLoopOutput,
    AgentLoopWorker,
    DictConfigWrap,
    ToolListWrap,
    _agent_loop_registry,
)
from verl.protocol import DataProto  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn  # noqa: E402
from verl.workers.rollout.llm_server import LLMServerClient  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

import frognano  # noqa: E402
from frognano.integrations import TextEpisode, first_prompt, reverse_patch, task_json  # noqa: E402
from frognano.integrations import verl as fv  # noqa: E402

SAMPLING = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}


def trainer_config(model_path, response_length=768, loop_config_path=None, max_turns=3):
    """verl's own PPO trainer config (its Hydra defaults) with the few overrides a run sets."""
    overrides = [
        f"actor_rollout_ref.model.path={model_path}",
        "actor_rollout_ref.rollout.name=vllm",
        "data.max_prompt_length=2048",
        f"data.max_response_length={response_length}",
        f"actor_rollout_ref.rollout.multi_turn.max_assistant_turns={max_turns}",
    ]
    if loop_config_path:
        overrides.append(f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loop_config_path}")
    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)


class RecordingServer(fv.FrogNanoServerManager):
    """The local backend, keeping every request and reply to check the loop's token layout."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        output = await super().generate(request_id, prompt_ids=prompt_ids, sampling_params=sampling_params,
                                        **kwargs)
        self.calls.append((list(prompt_ids), dict(sampling_params), output))
        return output


class ScriptedServer(LLMServerClient):
    """A scripted policy behind the same contract: replies with fixed texts (for a known fix)."""

    def __init__(self, tokenizer, replies):
        super().__init__(config=None)
        self.tokenizer, self.replies, self.calls = tokenizer, list(replies), []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        ids = self.tokenizer.encode(self.replies.pop(0), add_special_tokens=False) + [self.tokenizer.eos_token_id]
        output = TokenOutput(token_ids=ids, log_probs=[-0.25] * len(ids), stop_reason="completed")
        self.calls.append((list(prompt_ids), output))
        return output


def make_loop(worker, server, trainer=None, **options):
    """The loop as AgentLoopWorker._run_agent_loop instantiates it (options: extra YAML keys)."""
    config = OmegaConf.merge(_agent_loop_registry[fv.AGENT_NAME], options)
    return hydra.utils.instantiate(
        config=config, trainer_config=DictConfigWrap(config=trainer or worker.config), server_manager=server,
        tokenizer=worker.tokenizer, processor=worker.processor, hf_model_type=worker.hf_model_type,
        dataset_cls=worker.dataset_cls, data_config=DictConfigWrap(worker.config.data),
        tools=ToolListWrap(worker.tools))


def run_loop(worker, server, row, trainer=None, **options):
    """Constructs and runs the loop inside the event loop, as the worker does (verl's loops keep
    the running event loop they were made in)."""
    async def episode():
        return await make_loop(worker, server, trainer, **options).run(dict(SAMPLING), **row)
    return asyncio.run(episode())


def chat_ids(tokenizer, messages, generation_prompt):
    return list(tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=generation_prompt,
                                              return_dict=False))


def observation_ids(tokenizer, text):
    """An observation's user turn alone (plus the next generation prompt), as a suffix of a chat."""
    head = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    prefix = chat_ids(tokenizer, head, False)
    full = chat_ids(tokenizer, head + [{"role": "user", "content": text}], True)
    assert full[: len(prefix)] == prefix
    return full[len(prefix):]


def segments(mask):
    """(start, end, value) runs of the mask."""
    runs, start = [], 0
    for i in range(1, len(mask) + 1):
        if i == len(mask) or mask[i] != mask[start]:
            runs.append((start, i, mask[start]))
            start = i
    return runs


@pytest.fixture(scope="module")
def config(tiny_model):
    return trainer_config(tiny_model)


@pytest.fixture(scope="module")
def worker(config):
    return AgentLoopWorker(config, llm_client=None)


@pytest.fixture(scope="module")
def rows(tasks, worker, config, tmp_path_factory):
    """Real RLHFDataset rows (what AgentLoopWorker hands to run()) of two tasks."""
    path = fv.write_parquet(tasks[:2], tmp_path_factory.mktemp("verl") / "train.parquet")
    dataset = RLHFDataset(data_files=[path], tokenizer=worker.tokenizer, config=config.data, processor=None)
    return [dataset[i] for i in range(len(dataset))]


def test_registration_and_yaml():
    assert _agent_loop_registry["frognano"] == {"_target_": "frognano.integrations.verl.FrogNanoAgentLoop"}
    entries = OmegaConf.load(fv.agent_loop_config_path())
    assert [entry.name for entry in entries] == ["frognano"]
    assert hydra.utils.get_class(entries[0]._target_) is fv.FrogNanoAgentLoop


def test_dataset_rows(tasks, rows):
    row = fv.dataset_rows(tasks[:1])[0]
    assert row["agent_name"] == "frognano" and row["data_source"] == "frognano"
    assert row["prompt"] == [{"role": "user", "content": first_prompt(tasks[0])}]
    task = frognano.integrations.task_of_row(row)
    assert task["id"] == tasks[0]["id"] and os.path.isabs(task["repo"]["path"])
    # Through RLHFDataset: the raw prompt, the task in extra_info and the loop's name survive.
    assert [r["agent_name"] for r in rows] == ["frognano", "frognano"]
    assert rows[0]["raw_prompt"][0]["content"] == first_prompt(tasks[0])
    assert frognano.integrations.task_of_row(rows[1])["id"] == tasks[1]["id"]


def test_agent_loop_episodes_are_token_exact(tiny_model, worker, rows, tasks):
    server = RecordingServer(tiny_model, intra_threads=1)
    tokenizer, eos = worker.tokenizer, worker.tokenizer.eos_token_id
    for row, task in zip(rows, tasks[:2]):
        server.calls.clear()
        output = run_loop(worker, server, row, max_turns=3, max_tokens_per_turn=16)

        assert isinstance(output, AgentLoopOutput)
        AgentLoopOutput.model_validate(output.model_dump())
        assert output.as_dict()["responses"].tolist() == output.response_ids
        prompt = chat_ids(tokenizer, [{"role": "user", "content": first_prompt(task)}], True)
        assert output.prompt_ids == prompt
        ids, mask, logprobs = output.response_ids, output.response_mask, output.response_logprobs
        assert len(ids) == len(mask) == len(logprobs) <= 768

        # Replay the replies in a fresh episode: the mask-0 runs are exactly the tokenized
        # observations (after a closing token when a reply was cut short).
        expected_ids, expected_mask, expected_logprobs = [], [], []
        replay = TextEpisode(task, max_steps=3)
        try:
            for k, (sent, params, reply) in enumerate(server.calls):
                assert sent == prompt + expected_ids, "each request is the prompt plus the response so far"
                assert params["max_tokens"] <= 16
                expected_ids += reply.token_ids
                expected_mask += [1] * len(reply.token_ids)
                expected_logprobs += reply.log_probs
                observation, _, done, _ = replay.step(tokenizer.decode(reply.token_ids, skip_special_tokens=True))
                if done or k == len(server.calls) - 1:
                    break
                delta = ([] if reply.token_ids[-1] == eos else [eos]) + observation_ids(tokenizer, observation)
                expected_ids += delta
                expected_mask += [0] * len(delta)
                expected_logprobs += [0.0] * len(delta)
        finally:
            replay.close()
        assert ids == expected_ids and mask == expected_mask and logprobs == expected_logprobs
        assert sum(mask) == sum(len(reply.token_ids) for _, _, reply in server.calls)
        runs = segments(mask)
        assert [value for _, _, value in runs][:3] == [1, 0, 1], "generation, observation, generation"
        for start, end, value in runs:
            if value == 0:
                assert all(lp == 0.0 for lp in logprobs[start:end])
                assert "<|im_start|>user" in tokenizer.decode(ids[start:end], skip_special_tokens=False)

        # A random model's replies are not commands: error observations, then the sandbox grades.
        assert output.num_turns == len(server.calls) + (len(runs) - 1) // 2 + 1
        assert output.reward_score == 0.0
        assert output.extra_fields["task_id"] == task["id"]
        assert output.extra_fields["resolved"] is False
        # Three replies use up the episode's step budget (graded then); fewer: the token budget.
        assert output.extra_fields["stop_reason"] == ("done" if len(server.calls) == 3 else "response_length")
        assert output.extra_fields["tool_errors"] >= 1
        assert output.metrics.generate_sequences > 0 and output.metrics.compute_score > 0


def test_scripted_fix_resolves_through_the_loop(worker, rows, tasks):
    task = tasks[0]
    edit = ("edit tinyparse/config.py\n<<<<<<< SEARCH\n        if depth >= _MAX_INTERPOLATION_DEPTH:\n"
            "=======\n        if depth > _MAX_INTERPOLATION_DEPTH:\n>>>>>>> REPLACE")
    assert "if depth >= _MAX" in task["bug_patch"]
    server = ScriptedServer(worker.tokenizer, [edit, "submit"])
    output = run_loop(worker, server, rows[0])
    assert output.reward_score == 1.0 and output.extra_fields["resolved"] is True
    assert output.extra_fields["stop_reason"] == "done" and output.num_turns == 4
    (_, first), (sent, second) = server.calls
    # The observation of the edit is the only mask-0 run, between the two replies.
    replay = TextEpisode(task)
    try:
        text, _, _, _ = replay.step(edit)
    finally:
        replay.close()
    assert text.startswith("Edited tinyparse/config.py")
    observation = observation_ids(worker.tokenizer, text)
    assert sent == output.prompt_ids + first.token_ids + observation
    assert output.response_ids == first.token_ids + observation + second.token_ids
    assert output.response_mask == ([1] * len(first.token_ids) + [0] * len(observation)
                                    + [1] * len(second.token_ids))
    assert output.response_logprobs == first.log_probs + [0.0] * len(observation) + second.log_probs


def test_response_budget_truncates_consistently(tiny_model, worker, rows):
    small = OmegaConf.merge(worker.config, {"actor_rollout_ref": {"rollout": {"response_length": 40}}})
    server = RecordingServer(tiny_model, intra_threads=1)
    output = run_loop(worker, server, rows[1], small, max_tokens_per_turn=24)
    assert len(output.response_ids) == len(output.response_mask) == len(output.response_logprobs) <= 40
    assert output.extra_fields["stop_reason"] == "response_length"
    assert output.response_ids[:len(server.calls[0][2].token_ids)] == server.calls[0][2].token_ids
    assert all(params["max_tokens"] <= 40 for _, params, _ in server.calls)
    assert output.reward_score == 0.0  # still graded by the sandbox


def test_worker_generate_sequences_with_yaml(tiny_model, tasks, rows, tmp_path):
    # The registration as a user writes it: the YAML entry with extra keys for the loop.
    loop_yaml = fv.write_agent_loop_config(tmp_path / "loops.yaml", max_tokens_per_turn=12)
    assert OmegaConf.load(loop_yaml)[0].max_tokens_per_turn == 12
    config = trainer_config(tiny_model, response_length=256, loop_config_path=loop_yaml, max_turns=2)
    worker = AgentLoopWorker(config, llm_client=fv.FrogNanoServerManager(tiny_model, intra_threads=1))
    batch = DataProto.from_single_dict(collate_fn(rows))
    out = asyncio.run(worker.generate_sequences(batch))
    assert out.batch["prompts"].shape == (2, 2048) and out.batch["responses"].shape == (2, 256)
    assert out.batch["input_ids"].shape == (2, 2048 + 256)
    mask, logprobs = out.batch["response_mask"], out.batch["rollout_log_probs"]
    assert (logprobs[mask == 0] == 0).all() and (logprobs[mask == 1] < 0).any()
    valid = out.batch["attention_mask"][:, 2048:]
    assert (mask <= valid).all() and 0 < mask.sum().item() <= 2 * 2 * 12  # 2 rows, 2 turns of 12
    assert out.batch["rm_scores"].sum(-1).tolist() == [0.0, 0.0]
    assert list(out.non_tensor_batch["task_id"]) == [t["id"] for t in tasks[:2]]
    assert list(out.non_tensor_batch["resolved"]) == [False, False]
    assert (out.non_tensor_batch["__num_turns__"] >= 2).all()


class VersionedServer(RecordingServer):
    """The local backend as verl's servers behave across a weight update: each generation reports
    the next weight version, a preemption, speculative-decoding counters and routed experts."""

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        self.set_global_steps(7 + len(self.calls))
        output = await super().generate(request_id, prompt_ids=prompt_ids, sampling_params=sampling_params, **kwargs)
        k = len(self.calls)
        output.num_preempted = k
        output.routed_experts = [[[k]]] * (len(prompt_ids) + len(output.token_ids))
        output.extra_fields.update(spec_num_draft_tokens=10 * k, spec_num_accepted_tokens=k, num_cached_tokens=100 * k)
        return output


def test_server_fields_are_forwarded_as_verl_merges_them(tiny_model, worker, rows):
    server = VersionedServer(tiny_model, intra_threads=1)
    roomy = OmegaConf.merge(worker.config, {"actor_rollout_ref": {"rollout": {"response_length": 6000}}})
    output = run_loop(worker, server, rows[0], roomy, max_turns=3, max_tokens_per_turn=8)
    calls = len(server.calls)
    assert calls == 3
    fields = output.extra_fields
    # The weight versions the trajectory spans (verl's v1 trainer casts them to ints).
    assert (fields["min_global_steps"], fields["max_global_steps"]) == (7, 7 + calls - 1)
    assert fields["global_steps"] == 7 and fields["num_cached_tokens"] == 100  # the first generation's
    assert fields["spec_num_draft_tokens"] == sum(10 * k for k in range(1, calls + 1))
    assert fields["spec_num_accepted_tokens"] == sum(range(1, calls + 1))
    assert output.metrics.num_preempted == sum(range(1, calls + 1))
    # The last generation's routed experts, over the whole sequence the loop returns.
    assert output.routed_experts[0] == [[calls]]
    assert len(output.routed_experts) <= len(output.prompt_ids) + len(output.response_ids)
    assert output.as_dict()["routed_experts"].shape[0] == len(output.prompt_ids) + len(output.response_ids)
    assert fields["task_id"] == rows[0]["extra_info"]["task_id"] and fields["stop_reason"] == "done"
    # The plain local backend reports its weight version too, and pickles for Ray workers.
    plain = fv.FrogNanoServerManager(tiny_model, intra_threads=1, global_steps=4)
    copy = pickle.loads(pickle.dumps(plain))
    assert copy.global_steps == 4 and copy.model.path == plain.model.path
    reply = asyncio.run(copy.generate("r", prompt_ids=[1, 2, 3], sampling_params={"max_tokens": 2}))
    assert reply.extra_fields == {"global_steps": 4, "min_global_steps": 4, "max_global_steps": 4}
    assert reply.num_preempted == 0 and len(reply.token_ids) == len(reply.log_probs) <= 2


def test_compute_score_grades_patches(tasks):
    task = tasks[3]  # two hunks
    info = {"task": task_json(task)}
    fix = reverse_patch(task["bug_patch"])
    assert len(fv.patch_actions(fix)) == 2
    assert fv.compute_score("frognano", f"The fix:\n```diff\n{fix}```\n", task["id"], info) == 1.0
    assert fv.compute_score("frognano", fix, task_json(task)) == 1.0  # the task as ground_truth
    assert fv.compute_score("frognano", "", task["id"], info) == 0.0
    assert fv.compute_score("frognano", task["bug_patch"], task["id"], info) == 0.0  # the bug again
    assert fv.compute_score("frognano", "no diff here", task["id"], info) == 0.0  # an error observation


def test_bad_input(tiny_model, worker, rows):
    row = {k: v for k, v in rows[0].items() if k != "extra_info"}
    with pytest.raises(frognano.TaskError, match="carries no task"):
        run_loop(worker, RecordingServer(tiny_model, intra_threads=1), {**row, "extra_info": {"index": 0}})
    with pytest.raises(frognano.TaskError, match="compute_score needs the task"):
        fv.compute_score("frognano", "submit", "some-task-id", {"index": 0})
    with pytest.raises(frognano.TaskError):
        fv.dataset_rows([{"id": "no-repo"}])
    server = fv.FrogNanoServerManager(tiny_model, intra_threads=1)
    with pytest.raises(frognano.InvalidArgumentError, match="repetition_penalty"):
        asyncio.run(server.generate("r", prompt_ids=[1, 2], sampling_params={"repetition_penalty": 1.2}))


def test_example():
    out = run_example("verl_agent_loop.py")
    assert re.search(r"verl agent loop: 2 episodes, \d+ model tokens, \d+ observation tokens, resolved 0/2; "
                     r"compute_score\(true fix\)=1\.0, compute_score\(empty\)=0\.0", out), out
