"""FrogNano as an OpenRLHF agent: an ``AgentInstance`` over one task's ``RepoEnv`` and the
``AgentExecutor`` that OpenRLHF's ``--train.agent_func_path`` loads (tested with openrlhf
0.11.2).

OpenRLHF loads the file given as ``--train.agent_func_path`` by its path and instantiates its
``AgentExecutor`` with no arguments, so pass this module's file:

    python -c "import frognano.integrations.openrlhf as m; print(m.__file__)"
    python -m openrlhf.cli.train_ppo_ray ... --train.agent_func_path <that file> \\
        --data.input_key input --data.label_key label --data.apply_chat_template

with a prompt dataset written from ``dataset_rows(tasks)`` (an ``input`` chat holding the
task's opening observation and a ``label`` holding the task as JSON). Each sample is one
episode: every model reply is applied as one tool command, the tool's output comes back as
the next user turn in the policy's chat template, and the reward is the task's tests run in
the sandbox when the agent submits or the turn budget (``AgentInstance.max_turns``) ends. The
executor keeps the model's token ids and vLLM log-probs; feedback tokens get mask 0.

Settings (``max_turns`` 30, ``observation_chars`` 6000) are AgentInstance class attributes;
to change them, point ``--train.agent_func_path`` at a file of your own:

    from frognano.integrations import openrlhf

    class Agent(openrlhf.AgentInstance):
        max_turns = 10

    class AgentExecutor(openrlhf.AgentExecutor):
        def __init__(self):
            super().__init__(Agent)

The prompt: when the dataset row carries the opening observation (the default rows) the
prompt is kept as OpenRLHF rendered it. Rows may instead carry only ``TASK_MARKER``
(``dataset_rows(tasks, marker=True)``): a prompt that is just the marker becomes the task's
opening observation rendered as a user turn in the policy's chat template; a marker inside a
rendered prompt is replaced by the observation text.

To try the agent without vLLM or Ray, LocalEngine keeps vLLM's engine contract on a local
ONNX model (a folder that is also a Hugging Face checkpoint gives the matching tokenizer):

>>> row = dataset_rows("examples/tasks/sample.jsonl", marker=True)[0]
>>> engine = LocalEngine("path/to/model", max_new_tokens=64)
>>> tokenizer = transformers.AutoTokenizer.from_pretrained("path/to/model")
>>> out = asyncio.run(AgentExecutor().execute(row["input"], row["label"], LocalSamplingParams(),
...                                           4096, tokenizer, engine))
>>> out["reward"], out["observation_tokens"], out["action_ranges"], out["rollout_log_probs"]
"""

# No `from __future__ import annotations`: OpenRLHF executes this file without entering it in
# sys.modules, where dataclasses cannot resolve string annotations.
import asyncio
import contextvars
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Union

import frognano

# Absolute imports: OpenRLHF executes this file as a standalone module ("agent_module").
from frognano.integrations._common import (LocalGenerator, TextEpisode, Tasks, first_prompts, require, task_json,
                                           task_list, task_of)

_agent = require("openrlhf.utils.agent", "openrlhf")
torch = require("torch", "openrlhf")
AgentInstanceBase = _agent.AgentInstanceBase
MultiTurnAgentExecutor = _agent.MultiTurnAgentExecutor

TASK_MARKER = "<<frognano:task>>"

_PLACEHOLDER = "FROGNANO_REPLY_PLACEHOLDER"
_CHATML_USER = "<|im_start|>user\n{content}<|im_end|>\n<|im_start|>assistant\n"
_CHATML_END = "<|im_end|>\n"


class _Rollout:
    """What an AgentExecutor.execute() call shares with the AgentInstance it creates (the
    executor builds the instance with no arguments): the policy's tokenizer, the last reply's
    token ids and the instance itself."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self.last_action_ids: Optional[List[int]] = None
        self.instance: Optional["AgentInstance"] = None


# Set per execute() call; asyncio copies contexts per task, so concurrent rollouts stay apart.
_ROLLOUT: contextvars.ContextVar[Optional[_Rollout]] = contextvars.ContextVar("frognano_openrlhf_rollout",
                                                                               default=None)


def _has_template(tokenizer: Any) -> bool:
    return tokenizer is not None and bool(getattr(tokenizer, "chat_template", None))


def render_opening(observation: str, tokenizer: Any = None) -> str:
    """The task's opening observation as the first user turn plus the assistant prefix, in the
    tokenizer's chat template (ChatML without one)."""
    if _has_template(tokenizer):
        return tokenizer.apply_chat_template([{"role": "user", "content": observation}], tokenize=False,
                                             add_generation_prompt=True)
    return _CHATML_USER.format(content=observation)


def render_feedback(observation: str, tokenizer: Any = None, last_action_ids: Optional[Sequence[int]] = None) -> str:
    """What follows a model reply in the chat template: the end of the assistant turn, the
    observation as the next user turn and the assistant prefix. The end-of-turn text is left
    out when the reply's last token already is it (a reply that stopped at EOS); with
    last_action_ids unknown the reply is taken to have stopped at EOS."""
    tail = None
    if _has_template(tokenizer):
        # Render a turn around a placeholder reply and keep what follows the placeholder.
        rendered = tokenizer.apply_chat_template(
            [{"role": "user", "content": "."}, {"role": "assistant", "content": _PLACEHOLDER},
             {"role": "user", "content": observation}], tokenize=False, add_generation_prompt=True)
        at = rendered.find(_PLACEHOLDER)
        if at >= 0:
            tail = rendered[at + len(_PLACEHOLDER):]
    if tail is None:
        tail = _CHATML_END + _CHATML_USER.format(content=observation)
    ended = _end_token_text(tokenizer, last_action_ids)
    if ended and tail.startswith(ended):
        tail = tail[len(ended):]
    return tail


def _end_token_text(tokenizer: Any, last_action_ids: Optional[Sequence[int]]) -> Optional[str]:
    """The text of the special token a reply ended with (None when it ended with an ordinary
    token, i.e. was cut off)."""
    if last_action_ids is None:
        eos = getattr(tokenizer, "eos_token", None) if tokenizer is not None else "<|im_end|>"
        return eos if isinstance(eos, str) else None
    if not last_action_ids or tokenizer is None:
        return None
    last = int(last_action_ids[-1])
    if last not in set(getattr(tokenizer, "all_special_ids", ()) or ()):
        return None
    return tokenizer.decode([last], skip_special_tokens=False)


def _task_of_label(label: Any) -> Dict[str, Any]:
    if label is None or (isinstance(label, str) and not label.strip()):
        raise frognano.TaskError(
            "the OpenRLHF sample has no label: FrogNano reads the task from it (write the dataset with "
            "dataset_rows(tasks) and pass --data.label_key label)")
    try:
        return task_of(label)
    except frognano.TaskError as error:
        raise frognano.TaskError(f"the OpenRLHF label is not a FrogNano task: {error}") from error


class AgentInstance(AgentInstanceBase):
    """One FrogNano episode per OpenRLHF sample. Settings are class attributes (subclass to
    change them): max_turns (the turn budget; the episode is graded when it ends),
    observation_chars, sandbox (None: the process-wide one) and tokenizer (the chat template
    used when no AgentExecutor supplies the policy's tokenizer; ChatML without either)."""

    max_turns: int = 30
    observation_chars: int = 6000
    sandbox: Optional["frognano.Sandbox"] = None
    tokenizer: Any = None

    def __init__(self, *args: Any, **kwargs: Any):
        self.episode: Optional[TextEpisode] = None
        self.turns = 0
        self.tool_errors = 0
        self._reported = 0.0  # the reward handed out so far (each step returns its increment)

    def _chat_tokenizer(self) -> Any:
        rollout = _ROLLOUT.get()
        return rollout.tokenizer if rollout is not None and rollout.tokenizer is not None else self.tokenizer

    async def reset(self, states: Dict[str, Any], **kwargs: Any) -> Dict[str, Any]:
        """Opens the episode of the task in states["label"]; returns {"observation": prompt}
        (see the module docstring for how a TASK_MARKER prompt is filled in)."""
        task = _task_of_label(states.get("label"))
        await asyncio.to_thread(self.close)
        self.episode = await asyncio.to_thread(TextEpisode, task, sandbox=self.sandbox, max_steps=self.max_turns,
                                               observation_chars=self.observation_chars)
        self.turns, self.tool_errors, self._reported = 0, 0, 0.0
        rollout = _ROLLOUT.get()
        if rollout is not None:
            rollout.instance = self
        prompt = states.get("observation")
        text = self.episode.observation
        if not isinstance(prompt, str) or not prompt.strip() or prompt.strip() == TASK_MARKER:
            prompt = render_opening(text, self._chat_tokenizer())
        elif TASK_MARKER in prompt:
            prompt = prompt.replace(TASK_MARKER, text)
        return {"observation": prompt}

    async def step(self, state_dict: Dict[str, Any], **kwargs: Any) -> Dict[str, Any]:
        """Applies states["action_text"] as one tool command. rewards: this step's reward (0
        until the end, then the graded one); scores: the episode's reward so far;
        environment_feedback: the observation as the next user turn ("" once done)."""
        episode = self.episode
        if episode is None:
            raise frognano.EpisodeError("AgentInstance.step() before reset()")
        action = state_dict.get("action_text")
        action = action if isinstance(action, str) else ("" if action is None else str(action))
        self.turns += 1
        observation, _, done, info = await asyncio.to_thread(episode.step, action)
        self.tool_errors += bool(info.get("error"))
        if done or self.turns >= self.max_turns:
            await asyncio.to_thread(episode.finish)  # grades by submitting unless already graded
            done = True
        reward = episode.reward - self._reported
        self._reported = episode.reward
        feedback = ""
        if not done:
            rollout = _ROLLOUT.get()
            feedback = render_feedback(observation, self._chat_tokenizer(),
                                       rollout.last_action_ids if rollout is not None else None)
        return {
            "rewards": torch.tensor(float(reward)),
            "scores": torch.tensor(float(episode.reward)),
            "environment_feedback": feedback,
            "done": bool(done),
            "sampling_params": state_dict.get("sampling_params"),
            "extra_logs": self.logs(),
        }

    def logs(self) -> Dict[str, float]:
        """Numbers OpenRLHF logs per sample (it makes a tensor of each)."""
        outcome = (self.episode.outcome if self.episode is not None else None) or {}
        return {
            "resolved": float(bool(outcome.get("resolved"))),
            "turns": float(self.turns),
            "tool_errors": float(self.tool_errors),
            "test_runs": float(outcome.get("test_runs", 0)),
            "submitted": float(bool(outcome.get("submitted"))),
        }

    def close(self) -> None:
        if self.episode is not None:
            self.episode.close()
            self.episode = None


class _RecordingEngine:
    """Passes generate() through to the engine, noting the reply's token ids (render_feedback
    needs to know whether the reply ended with the end-of-turn token)."""

    def __init__(self, engine: Any, rollout: _Rollout):
        self._engine, self._rollout = engine, rollout

    async def generate(self, *args: Any, **kwargs: Any) -> Any:
        output = await self._engine.generate(*args, **kwargs)
        self._rollout.last_action_ids = list(output.outputs[0].token_ids)
        return output

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)


class AgentExecutor(MultiTurnAgentExecutor):
    """OpenRLHF's MultiTurnAgentExecutor bound to AgentInstance (or a subclass). It hands the
    policy's tokenizer to the instance, and grades an episode that the token budget (max_len)
    cut short, so every sample's reward is a sandboxed test run."""

    def __init__(self, agent_instance_cls: type = AgentInstance):
        super().__init__(agent_instance_cls)

    async def execute(self, prompt, label, sampling_params, max_length: int, hf_tokenizer, llm_engine,
                      images=None) -> Dict[str, Any]:
        rollout = _Rollout(hf_tokenizer)
        token = _ROLLOUT.set(rollout)
        try:
            result = await super().execute(prompt, label, sampling_params, max_length, hf_tokenizer,
                                           _RecordingEngine(llm_engine, rollout), images)
            instance = rollout.instance
            if instance is not None and instance.episode is not None and not instance.episode.done:
                await asyncio.to_thread(instance.episode.finish)
                result["reward"] = float(instance.episode.reward)
                result["scores"] = torch.tensor(float(instance.episode.reward))
                result["extra_logs"] = instance.logs()
            return result
        finally:
            _ROLLOUT.reset(token)
            if rollout.instance is not None:
                await asyncio.to_thread(rollout.instance.close)


def dataset_rows(tasks: Tasks, *, marker: bool = False, input_key: str = "input",
                 label_key: str = "label") -> List[Dict[str, Any]]:
    """OpenRLHF prompt-dataset rows, one per task: input_key holds the chat (the task's opening
    observation as the user message; use --data.apply_chat_template), or with marker=True just
    TASK_MARKER (filled in by AgentInstance.reset, with or without a chat template);
    label_key holds the task as JSON; datasource is "frognano"."""
    items = task_list(tasks)
    texts = [None] * len(items) if marker else first_prompts(items)
    rows = []
    for task, text in zip(items, texts):
        prompt: Union[str, List[Dict[str, str]]] = TASK_MARKER if marker else [{"role": "user", "content": text}]
        rows.append({input_key: prompt, label_key: task_json(task), "datasource": "frognano"})
    return rows


# A local engine with vLLM's contract ---------------------------------------------------------


@dataclass
class LocalSamplingParams:
    """The vLLM SamplingParams fields LocalEngine reads (a vllm.SamplingParams works too)."""

    max_tokens: Optional[int] = None
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    logprobs: Optional[int] = 0
    seed: Optional[int] = None
    stop: Optional[Union[str, List[str]]] = None
    stop_token_ids: Optional[List[int]] = None


@dataclass
class Logprob:
    logprob: float
    rank: Optional[int] = None
    decoded_token: Optional[str] = None


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: List[int]
    cumulative_logprob: Optional[float]
    logprobs: Optional[List[Dict[int, Logprob]]]
    finish_reason: Optional[str]
    stop_reason: Optional[Union[int, str]] = None


@dataclass
class RequestOutput:
    request_id: str
    prompt_token_ids: List[int]
    outputs: List[CompletionOutput] = field(default_factory=list)
    finished: bool = True


class LocalEngine:
    """An llm_engine over frognano.LocalModel keeping the contract OpenRLHF's executors use of
    their vLLM engine: ``await generate(prompt_token_ids, sampling_params,
    multi_modal_data=None)`` returns a vLLM-shaped RequestOutput whose outputs[0] has the
    generated token_ids, text, finish_reason ("stop" or "length") and, when
    sampling_params.logprobs is not None, logprobs as a list of {token_id: Logprob}. For running
    the agent end to end without vLLM or Ray (smoke tests, checking a task set).

    model: a LocalModel or what LocalModel takes. max_new_tokens caps each reply (OpenRLHF sets
    max_tokens to all the room left in max_len). A request without a seed gets seed + its
    request number, so a run is reproducible."""

    def __init__(self, model: Any, *, max_new_tokens: Optional[int] = None, seed: int = 0, intra_threads: int = 0):
        self.local = LocalGenerator(model, seed=seed, intra_threads=intra_threads)
        self.model = self.local.model
        self.max_new_tokens = max_new_tokens

    async def generate(self, prompt_token_ids: Sequence[int], sampling_params: Any,
                       multi_modal_data: Any = None) -> RequestOutput:
        if multi_modal_data:
            raise frognano.InvalidArgumentError("LocalEngine generates from text only (no multi_modal_data)")
        prompt = [int(t) for t in prompt_token_ids]
        # OpenRLHF asks for all the room left; the context bounds it in any case.
        limit = getattr(sampling_params, "max_tokens", None) or self.local.context_length - len(prompt)
        if self.max_new_tokens is not None:
            limit = min(limit, self.max_new_tokens)
        seed = getattr(sampling_params, "seed", None)
        seed = self.local.next_seed() if seed is None else seed
        generation = await self.local.generate(
            prompt, max_tokens=limit,
            temperature=getattr(sampling_params, "temperature", 1.0),
            top_k=getattr(sampling_params, "top_k", 0),
            top_p=getattr(sampling_params, "top_p", 1.0) or 1.0,
            seed=seed,
            stop=getattr(sampling_params, "stop", None),
            stop_token_ids=getattr(sampling_params, "stop_token_ids", None),
        )
        ids = [int(t) for t in generation["token_ids"]]
        logprobs = None
        if getattr(sampling_params, "logprobs", None) is not None:
            logprobs = [{t: Logprob(float(lp), rank=None)} for t, lp in zip(ids, generation["logprobs"])]
        completion = CompletionOutput(
            index=0, text=generation["text"], token_ids=ids,
            cumulative_logprob=float(sum(generation["logprobs"])), logprobs=logprobs,
            finish_reason="length" if generation["finish_reason"] == "length" else "stop")
        return RequestOutput(request_id=f"frognano-{seed}", prompt_token_ids=prompt, outputs=[completion])


__all__ = [
    "TASK_MARKER",
    "AgentExecutor",
    "AgentInstance",
    "LocalEngine",
    "LocalSamplingParams",
    "dataset_rows",
    "render_feedback",
    "render_opening",
]
