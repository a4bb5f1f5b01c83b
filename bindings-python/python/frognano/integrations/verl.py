"""FrogNano in verl's agent loop (tested with verl 0.9.1, ``verl.experimental.agent_loop``).

- ``FrogNanoAgentLoop``: an ``AgentLoopBase`` registered as ``"frognano"``, token in / token out.
  Each dataset row carries a task (``extra_info["task"]``); the loop opens a ``TextEpisode`` on
  it, renders the opening observation as the first user message with the tokenizer's chat
  template, generates with ``server_manager.generate``, applies each reply as a text action and
  appends only the tokenized observation (the model's ids stay exactly as generated; verl's
  Continuous Token builder handles the turn boundaries), then grades the repository with the
  task's tests in the sandbox. ``response_mask`` is 1 on model tokens and 0 on observation
  tokens, whose log-probs are 0.0; ``reward_score`` is the episode's reward. What the server
  reports with each generation reaches the output as verl's own ToolAgentLoop forwards it
  (``extra_fields`` with the ``min_global_steps`` / ``max_global_steps`` the v1 trainer reads,
  ``num_preempted``, ``routed_experts``).
- ``agent_loop_config_path()``: the registration YAML for
  ``actor_rollout_ref.rollout.agent.agent_loop_config_path``; ``write_agent_loop_config(path,
  **options)`` writes one that passes options (max_turns, max_tokens_per_turn, ...) to the loop.
- ``compute_score``: a custom reward function (``reward.custom_reward_function``) grading a
  unified diff against the row's task in the sandbox.
- ``FrogNanoServerManager``: the server manager contract over ``frognano.LocalModel`` (token
  ids in, token ids and log-probs out), to run the loop locally without an inference server;
  it pickles, so verl's Ray workers (``AgentLoopManagerTQ`` of the v1 trainer) can take it.
- ``dataset_rows`` / ``write_parquet``: task sets as rows of verl's ``RLHFDataset``.

Usage::

    from frognano.integrations import verl as fv

    fv.write_parquet("examples/tasks/sample.jsonl", "train.parquet")
    # python -m verl.trainer.main_ppo data.train_files=train.parquet \\
    #     actor_rollout_ref.rollout.mode=async actor_rollout_ref.rollout.calculate_log_probs=True \\
    #     actor_rollout_ref.rollout.agent.agent_loop_config_path=<fv.agent_loop_config_path()> ...
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union
from uuid import uuid4

import frognano

from ._common import (LocalGenerator, TextEpisode, Task, Tasks, first_prompts, patch_actions, require, task_json,
                      task_list, task_of, task_of_row)

require("verl", "verl")
_agent_loop = require("verl.experimental.agent_loop.agent_loop", "verl")
_replica = require("verl.workers.rollout.replica", "verl")
_llm_server = require("verl.workers.rollout.llm_server", "verl")
_profiler = require("verl.utils.profiler", "verl")

AgentLoopBase = _agent_loop.AgentLoopBase
AgentLoopMetrics = _agent_loop.AgentLoopMetrics
AgentLoopOutput = _agent_loop.AgentLoopOutput
LLMServerClient = _llm_server.LLMServerClient
TokenOutput = _replica.TokenOutput
simple_timer = _profiler.simple_timer

AGENT_NAME = "frognano"
DATA_SOURCE = "frognano"
DEFAULT_MAX_TURNS = 8

__all__ = [
    "AGENT_NAME",
    "DATA_SOURCE",
    "FrogNanoAgentLoop",
    "FrogNanoServerManager",
    "agent_loop_config_path",
    "compute_score",
    "dataset_rows",
    "patch_actions",
    "write_agent_loop_config",
    "write_parquet",
]


@_agent_loop.register(AGENT_NAME)
class FrogNanoAgentLoop(AgentLoopBase):
    """A multi-turn repair episode of the row's task, token in / token out.

    Options (keyword arguments, e.g. extra keys of the registration YAML entry):
    max_turns (default: rollout.multi_turn.max_assistant_turns, else 8) bounds the model's
    replies; max_tokens_per_turn caps each reply (default: what is left of
    rollout.response_length); observation_chars bounds each observation; observation_role is
    the chat role of the observations ("user"; "tool" for templates that render tool turns);
    system_prompt is a system message put before the task (a system message at the head of
    the row's prompt is used otherwise)."""

    def __init__(self, *args: Any, max_turns: Optional[int] = None, max_tokens_per_turn: Optional[int] = None,
                 observation_chars: int = 6000, observation_role: str = "user",
                 system_prompt: Optional[str] = None, **kwargs: Any):
        kwargs.pop("tools", None)  # verl's tool list: the environment is this loop's tool set
        super().__init__(*args, **kwargs)
        multi_turn = self.rollout_config.get("multi_turn") or {}
        self.max_turns = int(max_turns or multi_turn.get("max_assistant_turns") or DEFAULT_MAX_TURNS)
        if self.max_turns < 1:
            raise frognano.InvalidArgumentError(f"max_turns must be at least 1, not {self.max_turns}")
        if observation_role not in ("user", "tool"):
            raise frognano.InvalidArgumentError(
                f"observation_role must be 'user' or 'tool', not {observation_role!r}")
        self.max_tokens_per_turn = int(max_tokens_per_turn) if max_tokens_per_turn else None
        self.observation_chars = int(observation_chars)
        self.observation_role = observation_role
        self.system_prompt = system_prompt
        self.response_length = int(self.rollout_config.response_length)

    async def run(self, sampling_params: Dict[str, Any], **row: Any) -> AgentLoopOutput:
        task = task_of_row(row)  # a row without a task fails here, before any work
        # Sandbox work (a workspace copy now, test runs later) goes to threads, off the event loop.
        episode = await asyncio.to_thread(TextEpisode, task, max_steps=self.max_turns,
                                          observation_chars=self.observation_chars)
        try:
            return await self._run_episode(episode, dict(sampling_params), row)
        finally:
            await asyncio.to_thread(episode.close)

    async def _run_episode(self, episode: TextEpisode, sampling_params: Dict[str, Any],
                           row: Mapping[str, Any]) -> AgentLoopOutput:
        messages = self._system_messages(row) + [{"role": "user", "content": episode.observation}]
        prompt_ids = await self.ct_build_initial_tokens(messages)
        runtime_ids = list(prompt_ids)  # the prompt followed by everything appended so far
        mask: List[int] = []
        logprobs: Optional[List[float]] = []  # None once a generation comes back without them
        end_of_turn = self._end_of_turn_ids(sampling_params)
        timing: Dict[str, Any] = {}
        served = _ServedFields()  # what the server reports per generation, merged as verl's tool loop does
        request_id = uuid4().hex  # one id per episode: sticky routing for prefix caching
        assistant_turns = observation_turns = 0
        stop = "max_turns"
        while True:
            budget = self.response_length - len(mask)
            if budget <= 0:
                stop = "response_length"
                break
            params = dict(sampling_params)
            params["max_tokens"] = min(int(params.get("max_tokens") or self.max_tokens_per_turn or budget), budget)
            with simple_timer("generate_sequences", timing):
                output = await self.server_manager.generate(request_id=request_id, prompt_ids=runtime_ids,
                                                            sampling_params=params)
            served.add(output)
            token_ids = [int(t) for t in output.token_ids]
            if not token_ids:  # an aborted request
                stop = "aborted"
                break
            if output.log_probs is None or logprobs is None:
                logprobs = None
            elif len(output.log_probs) != len(token_ids):
                raise frognano.InferenceError(
                    f"the server returned {len(output.log_probs)} log-probs for {len(token_ids)} tokens")
            merged, mask, merged_logprobs = await self.ct_merge_assistant_token(
                runtime_ids, token_ids, mask, logprobs,
                assistant_logprobs=list(output.log_probs) if logprobs is not None else None)
            runtime_ids, logprobs = merged.token_ids, merged_logprobs
            assistant_turns += 1
            if len(mask) >= self.response_length:
                # As verl's tool loop does: a reply that used up the budget is not executed.
                stop = "response_length"
                break
            text = self.tokenizer.decode(token_ids, skip_special_tokens=True)
            messages.append({"role": "assistant", "content": text})
            with simple_timer("tool_calls", timing):
                observation, _, done, _ = await asyncio.to_thread(episode.step, text)
            if done:
                stop = "done"
                break
            if assistant_turns >= self.max_turns:
                break
            # A reply cut short (no end-of-turn token) is closed before the observation, so the
            # transcript stays a well-formed chat; the closing token is not the model's (mask 0).
            closing = [] if token_ids[-1] in end_of_turn or self.tokenizer.eos_token_id is None \
                else [int(self.tokenizer.eos_token_id)]
            previous = list(messages)
            messages.append({"role": self.observation_role, "content": observation})
            merged, new_mask, new_logprobs = await self.ct_merge_context_msg(
                previous, messages, runtime_ids + closing, mask + [0] * len(closing),
                logprobs + [0.0] * len(closing) if logprobs is not None else None)
            if len(new_mask) >= self.response_length:
                stop = "response_length"
                break
            runtime_ids, mask, logprobs = merged.token_ids, new_mask, new_logprobs
            observation_turns += 1

        with simple_timer("compute_score", timing):
            reward = await asyncio.to_thread(episode.finish)
        outcome = episode.outcome or {}
        response_ids = runtime_ids[len(runtime_ids) - len(mask):] if mask else []
        prompt_ids = runtime_ids[: len(runtime_ids) - len(mask)]
        n = self.response_length
        if served.num_preempted is not None:
            timing["num_preempted"] = served.num_preempted
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids[:n],
            response_mask=mask[:n],
            response_logprobs=logprobs[:n] if logprobs is not None else None,
            routed_experts=(served.routed_experts[: len(prompt_ids) + n]
                            if served.routed_experts is not None else None),
            reward_score=float(reward),
            num_turns=assistant_turns + observation_turns + 1,  # verl counts the prompt as a turn
            metrics=AgentLoopMetrics(**timing),
            extra_fields={
                **served.extra_fields,
                "task_id": episode.task["id"],
                "resolved": bool(episode.resolved),
                "submitted": bool(outcome.get("submitted", False)),
                "tool_errors": int(outcome.get("tool_errors", 0)),
                "stop_reason": stop,
                "turn_scores": [],
                "tool_rewards": [],
            },
        )

    def _system_messages(self, row: Mapping[str, Any]) -> List[Dict[str, Any]]:
        if self.system_prompt:
            return [{"role": "system", "content": self.system_prompt}]
        raw = row.get("raw_prompt")
        if raw is not None and len(raw) and isinstance(raw[0], Mapping) and raw[0].get("role") == "system":
            return [dict(raw[0])]
        return []

    def _end_of_turn_ids(self, sampling_params: Mapping[str, Any]) -> set:
        ids = {int(t) for t in (sampling_params.get("stop_token_ids") or [])}
        if self.tokenizer.eos_token_id is not None:
            ids.add(int(self.tokenizer.eos_token_id))
        return ids


# Counters a server reports per generation that add up over an episode's generations.
_SUMMED_FIELDS = ("spec_num_draft_tokens", "spec_num_accepted_tokens", "spec_num_verify_steps")


class _ServedFields:
    """What the server reports with each generation (``TokenOutput.extra_fields``,
    ``num_preempted``, ``routed_experts``), merged over an episode as verl's ToolAgentLoop merges
    them: the first generation's extra fields are kept, except that ``min_global_steps`` is the
    smallest and ``max_global_steps`` the largest seen (the weight versions the trajectory spans,
    which verl's v1 trainer reads as ints), and the speculative-decoding counters are summed;
    ``num_preempted`` is the first generation's (-1 when it reports none) plus the later ones';
    ``routed_experts`` is the last one reported (it covers the whole sequence so far)."""

    def __init__(self) -> None:
        self.extra_fields: Dict[str, Any] = {}
        self.num_preempted: Optional[int] = None
        self.routed_experts: Any = None
        self._seen = False

    def add(self, output: Any) -> None:
        preempted = getattr(output, "num_preempted", None)
        if self.num_preempted is None:
            self.num_preempted = int(preempted) if preempted is not None else -1
        elif preempted is not None:
            self.num_preempted += int(preempted)
        if getattr(output, "routed_experts", None) is not None:
            self.routed_experts = output.routed_experts
        fields = dict(getattr(output, "extra_fields", None) or {})
        if not self._seen:
            self.extra_fields.update(fields)
            self._seen = True
            return
        for key, pick in (("min_global_steps", min), ("max_global_steps", max)):
            value = fields.get(key)
            if value is not None:
                known = self.extra_fields.get(key)
                self.extra_fields[key] = value if known is None else pick(known, value)
        for key in _SUMMED_FIELDS:
            if key in fields and key in self.extra_fields:
                self.extra_fields[key] = int(self.extra_fields[key]) + int(fields[key])


def agent_loop_config_path() -> str:
    """The registration YAML of the loop, for
    ``actor_rollout_ref.rollout.agent.agent_loop_config_path`` (it names the class by import
    path, so the workers need not import this module first)."""
    return str(Path(__file__).with_name("verl_agent_loop.yaml"))


def write_agent_loop_config(path: Union[str, "os.PathLike[str]"], **options: Any) -> str:
    """Writes a registration YAML whose entry passes `options` to the loop (max_turns,
    max_tokens_per_turn, observation_chars, observation_role, system_prompt); returns its path."""
    from omegaconf import OmegaConf

    entries = OmegaConf.load(agent_loop_config_path())
    for key, value in options.items():
        entries[0][key] = value
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(entries, out)
    return str(out)


# Sampling options the local model cannot honour, with the value that means "off".
_UNSUPPORTED_SAMPLING = {"repetition_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0,
                         "ignore_eos": False, "n": 1, "min_tokens": 0}


class FrogNanoServerManager(LLMServerClient):
    """verl's server manager contract over a local ``frognano.LocalModel``:
    ``await generate(request_id, prompt_ids=..., sampling_params=...) -> TokenOutput`` with the
    generated ids (the end-of-sequence token included, as vLLM returns it) and their
    log-probs. Text only. Generation runs in a thread; calls on one model run one at a time.

    Each output's ``extra_fields`` carry ``global_steps`` and ``min_global_steps`` /
    ``max_global_steps`` (the weight version that generated it, as verl's servers report
    them and its v1 trainer reads them): ``global_steps`` (default 0), which
    ``set_global_steps`` updates after the model's weights change. ``num_preempted`` is 0.

    It pickles (as the model's folder and these options; a copy loads the model again), so it
    can be handed to verl's Ray workers as their ``llm_client``.

    model: a LocalModel or its folder / registry name. max_tokens: the default when the
    sampling params name none. seed: request k samples with seed + k unless the params give
    a seed (each copy counts its requests from 0). Raises InvalidArgumentError for sampling
    options the local model cannot honour (repetition / presence / frequency penalties,
    ignore_eos, n > 1); options that do not change the sampled distribution (e.g.
    skip_special_tokens) are ignored."""

    def __init__(self, model: Union["frognano.LocalModel", str, "os.PathLike[str]"], *, max_tokens: int = 256,
                 seed: int = 0, intra_threads: int = 0, config: Any = None, global_steps: int = 0):
        super().__init__(config=config)
        self.local = LocalGenerator(model, seed=seed, intra_threads=intra_threads)
        self.model = self.local.model
        self.max_tokens = int(max_tokens)
        self.intra_threads = int(intra_threads)
        self.global_steps = int(global_steps)

    def set_global_steps(self, global_steps: int) -> None:
        """The weight version the next generations report (verl's servers have the same call)."""
        self.global_steps = int(global_steps)

    def __reduce__(self):
        return (_rebuild_server_manager, (self.model.path, self.max_tokens, self.local.seed, self.intra_threads,
                                          self.config, self.global_steps))

    async def generate(self, request_id: str, *, prompt_ids: Sequence[int], sampling_params: Mapping[str, Any],
                       image_data: Any = None, video_data: Any = None, audio_data: Any = None,
                       mm_processor_kwargs: Any = None, **kwargs: Any) -> TokenOutput:
        if image_data or video_data or audio_data:
            raise frognano.InvalidArgumentError("FrogNanoServerManager generates from text only")
        params = dict(sampling_params)
        for key, off in _UNSUPPORTED_SAMPLING.items():
            value = params.get(key, off)
            if value is not None and value != off:
                raise frognano.InvalidArgumentError(f"the local model does not support {key}={value!r}")
        steps = self.global_steps
        generation = await self.local.generate(
            prompt_ids,
            max_tokens=params.get("max_tokens") or params.get("max_new_tokens") or self.max_tokens,
            temperature=params.get("temperature", 1.0),
            top_k=params.get("top_k", 0),
            top_p=params.get("top_p", 1.0),
            seed=params.get("seed"),
            stop=params.get("stop"),
            stop_token_ids=params.get("stop_token_ids"),
        )
        want_logprobs = params.get("logprobs", True)
        return TokenOutput(
            token_ids=list(generation["token_ids"]),
            log_probs=list(generation["logprobs"]) if want_logprobs not in (False, None) else None,
            stop_reason="completed",  # vLLM's word for both a stop and the length limit
            num_preempted=0,
            extra_fields={"global_steps": steps, "min_global_steps": steps, "max_global_steps": steps},
        )


def _rebuild_server_manager(path: str, max_tokens: int, seed: int, intra_threads: int, config: Any,
                            global_steps: int) -> FrogNanoServerManager:
    return FrogNanoServerManager(path, max_tokens=max_tokens, seed=seed, intra_threads=intra_threads,
                                 config=config, global_steps=global_steps)


def compute_score(data_source: Any, solution_str: str, ground_truth: Any,
                  extra_info: Optional[Mapping[str, Any]] = None, **kwargs: Any) -> float:
    """verl's custom reward function: 1.0 when the solution resolves the task, else 0.0.

    solution_str is a unified diff against the task's repository as given to the agent (the
    bug present), e.g. ``--- a/pkg/mod.py`` / ``+++ b/pkg/mod.py`` / ``@@ ... @@`` hunks, bare or
    inside a fenced block among other text. Each hunk is applied as an edit of its file (its
    removed and context lines must occur exactly once there), then the repository is graded
    by the task's tests in the sandbox (its failing tests must pass, the others keep
    passing). A solution without a diff is taken as one environment action (e.g. an ``edit``
    command or a whole fixed function in a python block) and graded after it; an empty one
    scores 0.0. The task comes from extra_info (its ``task``, as ``dataset_rows`` writes it) or
    from ground_truth (a task dict or JSON string); raises TaskError when neither holds one."""
    task = _task_for_score(ground_truth, extra_info)
    text = solution_str if isinstance(solution_str, str) else ""
    actions: List[Union[str, Dict[str, Any]]] = patch_actions(text)
    if not actions and text.strip():
        actions = [text]
    if not actions:
        return 0.0
    episode = TextEpisode(task, max_steps=len(actions) + 1)
    try:
        for action in actions:
            _, _, done, _ = episode.step(action)
            if done:
                break
        episode.finish()
        return 1.0 if episode.resolved else 0.0
    finally:
        episode.close()


def _task_for_score(ground_truth: Any, extra_info: Optional[Mapping[str, Any]]) -> Task:
    if isinstance(extra_info, Mapping):
        try:
            return task_of_row(extra_info)
        except frognano.TaskError:
            pass
    if isinstance(ground_truth, Mapping):
        return task_of_row(ground_truth)
    if isinstance(ground_truth, str) and ground_truth.lstrip().startswith("{"):
        return task_of(ground_truth)
    raise frognano.TaskError(
        "compute_score needs the task: extra_info['task'] (as dataset_rows writes it) or a task as "
        f"ground_truth; got ground_truth={str(ground_truth)[:80]!r} and extra_info keys "
        f"{sorted(extra_info) if isinstance(extra_info, Mapping) else None}")


def _portable(task: Task) -> Task:
    """The task with a local repository path made absolute, so the rows work from any cwd."""
    repo = task.get("repo")
    if isinstance(repo, Mapping) and repo.get("kind") == "path" and not os.path.isabs(str(repo.get("path", ""))):
        task = dict(task)
        task["repo"] = {**repo, "path": os.path.abspath(str(repo["path"]))}
    return task


def dataset_rows(tasks: Tasks, *, agent_name: str = AGENT_NAME, data_source: str = DATA_SOURCE,
                 split: Optional[str] = None) -> List[Dict[str, Any]]:
    """Rows of verl's RLHFDataset, one per task: ``prompt`` (the opening observation as the
    user message), ``data_source``, ``agent_name`` (which agent loop runs the row),
    ``reward_model`` (ground_truth: the task id) and ``extra_info`` with ``index``, ``task_id``
    and ``task`` (the task as JSON, its local repository path made absolute)."""
    items = [_portable(task) for task in task_list(tasks)]
    rows = []
    for index, (task, text) in enumerate(zip(items, first_prompts(items))):
        rows.append({
            "data_source": data_source,
            "agent_name": agent_name,
            "prompt": [{"role": "user", "content": text}],
            "ability": "code-repair",
            "reward_model": {"style": "rule", "ground_truth": str(task["id"])},
            "extra_info": {"index": index, "task_id": str(task["id"]), "task": task_json(task),
                           "split": split or "train"},
        })
    return rows


def write_parquet(tasks: Tasks, path: Union[str, "os.PathLike[str]"], **options: Any) -> str:
    """Writes ``dataset_rows(tasks, **options)`` as a parquet file for ``data.train_files`` /
    ``data.val_files``; returns its path."""
    import pandas

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    pandas.DataFrame(dataset_rows(tasks, **options)).to_parquet(out, index=False)
    return str(out)
