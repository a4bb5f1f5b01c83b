"""FrogNano as a SkyRL environment: a skyrl-gym ``BaseTextEnv`` over one task's ``RepoEnv``
(tested with skyrl-gym 0.4.0).

Each episode is one task: ``init(prompt)`` opens it and returns the chat (the task's opening
observation, i.e. its problem statement and the tool instructions, as the user message);
``step(action)`` applies the model's reply as one tool command and answers with the tool's
output as the next user message. Malformed replies are not exceptions: they get the
environment's error observation and the episode goes on. The reward comes from running the
task's tests in the sandbox when the agent submits or the turn budget ends.

>>> from frognano.integrations import skyrl
>>> skyrl.register()                                    # env id "frognano"
>>> rows = skyrl.dataset_rows("examples/tasks/sample.jsonl")   # prompt, env_class, task, ...
>>> env = skyrl_gym.make("frognano", env_config={"max_turns": 8}, extras=rows[0])
>>> chat, info = env.init(rows[0]["prompt"])
>>> out = env.step("test")                              # observations, reward, done, metadata

With skyrl-train, write the rows to parquet (``data.train_data``), set
``environment.env_class=frognano`` and pass the options under
``environment.skyrl_gym.frognano``; call ``register()`` in the process that builds the
environments before training starts (SkyRL's examples register their environments in the Ray
entry point). The options:

- ``max_turns``: the turn budget. SkyRL's generator writes its own ``generator.max_turns``
  (default 1) into every row's extras; the environment's configured ``max_turns`` wins over
  it, and without one the generator's value is the budget (a budget of 1 warns: the first
  reply is graded as the final state).
- ``max_input_length`` and ``tokenizer``: the generator's ``generator.max_input_length`` and the
  policy's tokenizer (its path or name). SkyRL's generator stops an episode whose context
  outgrows max_input_length before the next generation, so without a step left to return a
  reward the episode would get none; with these two set, the environment counts the tokens as
  the generator does and ends the episode, graded, at the step whose observation would not fit
  (``length_margin`` tokens early, default 16). Episodes cut anyway are graded in
  ``get_metrics`` (metrics only, with a warning).
- ``observation_chars``: how much of a tool's output one observation shows.
"""

from __future__ import annotations

import threading
import warnings
from typing import Any, Dict, List, Mapping, Optional, Tuple

import frognano

from ._common import TextEpisode, Tasks, first_prompts, require, task_json, task_list, task_of_row

skyrl_gym = require("skyrl_gym", "skyrl")
from skyrl_gym.envs.base_text_env import (  # noqa: E402
    BaseTextEnv,
    BaseTextEnvStepOutput,
    ConversationType,
)

ENV_ID = "frognano"
ENTRY_POINT = "frognano.integrations.skyrl:FrogNanoTextEnv"

# The defaults of the options env_config (or a row's extras) may set.
DEFAULT_MAX_TURNS = 30
DEFAULT_OBSERVATION_CHARS = 6000
DEFAULT_LENGTH_MARGIN = 16
# The conversation SkyRL's generator renders observations after (SkyRLGymGenerator.base_conversation).
_BASE_CONVERSATION = [{"role": "system", "content": "You are a helpful assistant."},
                      {"role": "user", "content": "I am a user."}]


def _option(config: Any, name: str, default: Any) -> Any:
    """An option of env_config, which SkyRL hands over as a dict, an OmegaConf DictConfig
    (a Mapping) or a dataclass-like object; None means none given."""
    if config is None:
        return default
    if isinstance(config, Mapping):
        value = config.get(name)
    else:
        value = getattr(config, name, None)
    return default if value is None else value


def _positive_int(value: Any, name: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if number < 1 or isinstance(value, bool):
        raise frognano.InvalidArgumentError(f"{name} must be a positive integer, not {value!r}")
    return number


class FrogNanoTextEnv(BaseTextEnv):
    """One FrogNano task as a skyrl-gym text environment.

    env_config: ``max_turns`` (the agent's turn budget; the episode is graded when it ends;
    ``max_steps`` is accepted as an alias), ``observation_chars`` (how much of a tool's output
    one observation shows, default 6000), ``max_input_length``, ``tokenizer`` and
    ``length_margin`` (see the module's doc). The configured max_turns wins over the extras'
    ``max_turns`` (which SkyRL's generator sets to its generator.max_turns); without one, the
    extras' value is the budget, else 30. extras: the dataset row; it must carry the task (a
    ``task`` column with the task as JSON, as ``dataset_rows`` writes it, or
    extra_info/extras holding one). Raises TaskError when it does not."""

    def __init__(self, env_config: Any = None, extras: Optional[Mapping[str, Any]] = None,
                 *, sandbox: Optional["frognano.Sandbox"] = None):
        super().__init__()
        extras = {} if extras is None else extras
        self.task: Dict[str, Any] = task_of_row(extras)
        turns = _option(env_config, "max_turns", _option(env_config, "max_steps", None))
        if turns is None:
            turns = _option(extras, "max_turns", DEFAULT_MAX_TURNS)
        self.max_turns = _positive_int(turns, "max_turns")
        if self.max_turns == 1:
            warnings.warn(
                "a FrogNano episode of 1 turn: the model's first reply is graded as the final state. SkyRL's "
                "generator passes generator.max_turns (default 1); set environment.skyrl_gym.frognano.max_turns "
                "(or generator.max_turns) to give the agent room to act", stacklevel=2)
        self.observation_chars = _positive_int(
            _option(env_config, "observation_chars", DEFAULT_OBSERVATION_CHARS), "observation_chars")
        self.meter = _ContextMeter.of(env_config)
        self.sandbox = sandbox
        self.episode: Optional[TextEpisode] = None
        self.turns = 0
        self.context_cut = False  # whether the last episode was ended by the context budget
        self._reported = 0.0  # the reward handed out so far (each step returns its increment)

    @property
    def task_id(self) -> str:
        return str(self.task["id"])

    def init(self, prompt: ConversationType) -> Tuple[ConversationType, Dict[str, Any]]:
        """Opens the episode. Returns the prompt's system messages followed by the task's
        opening observation as the user message (so a row may carry any placeholder user
        turn), and {"task_id", "max_turns"}."""
        self.close()
        self.turns = 0
        self.context_cut = False
        self._reported = 0.0
        # The RepoEnv's own step limit is the turn budget: its last step is graded.
        self.episode = TextEpisode(self.task, sandbox=self.sandbox, max_steps=self.max_turns,
                                   observation_chars=self.observation_chars)
        system = [dict(m) for m in (prompt or []) if isinstance(m, Mapping) and m.get("role") == "system"]
        chat = system + [{"role": "user", "content": self.episode.observation}]
        if self.meter is not None:
            self.meter.start(chat)
        return chat, {"task_id": self.task_id, "max_turns": self.max_turns}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        """Applies one reply of the model as a tool command. The reward is 0 until the end;
        the step that ends the episode (a submit, the last turn, or an observation that would
        not fit max_input_length) returns the graded reward and no observation."""
        episode = self.episode
        if episode is None:
            raise frognano.EpisodeError("FrogNanoTextEnv.step() before init(): call init(prompt) first")
        if episode.done:
            raise frognano.EpisodeError("the episode has ended; init() a new one")
        if not isinstance(action, str):
            action = "" if action is None else str(action)
        self.turns += 1
        observation, _, done, info = episode.step(action)
        if not done and self.turns < self.max_turns and self.meter is not None:
            # SkyRL would stop before the next generation, with no step left to return a reward.
            self.context_cut = not self.meter.fits(action, observation)
            done = self.context_cut
        if done or self.turns >= self.max_turns:
            # Grades by submitting if the RepoEnv has not ended (and graded) the episode itself.
            episode.finish()
            done = True
        reward = episode.reward - self._reported
        self._reported = episode.reward
        metadata: Dict[str, Any] = {
            "task_id": self.task_id,
            "turn": self.turns,
            "tool": info.get("tool"),
            "error": bool(info.get("error")),
            "resolved": episode.resolved,
        }
        if done:
            metadata["outcome"] = episode.outcome
            metadata["context_cut"] = self.context_cut
        return BaseTextEnvStepOutput(
            observations=[] if done else [{"role": "user", "content": observation}],
            reward=float(reward),
            done=bool(done),
            metadata=metadata,
        )

    def get_metrics(self) -> Dict[str, Any]:
        """Per-episode numbers (SkyRL averages them over episodes). SkyRL's generator calls it
        when the episode is over, also when it stopped the episode itself (the context
        outgrew its max_input_length): such an episode is graded here, so the metrics hold
        its outcome, but its reward cannot reach training (a warning says how to end such
        episodes with a graded step)."""
        if self.episode is not None and not self.episode.done and self.turns:
            warnings.warn(
                f"the FrogNano episode of task {self.task_id} was stopped after {self.turns} turn(s) without a "
                "graded step (SkyRL's generator cuts an episode whose context outgrows max_input_length); it is "
                "graded now for the metrics, but its reward is lost. Set max_input_length and tokenizer under "
                "environment.skyrl_gym.frognano so that the environment ends such episodes graded",
                stacklevel=2)
            self.episode.finish()
        outcome = (self.episode.outcome if self.episode is not None else None) or {}
        return {
            "turns": self.turns,
            "resolved": float(bool(outcome.get("resolved"))),
            "reward": float(self.episode.reward) if self.episode is not None else 0.0,
            "tool_errors": int(outcome.get("tool_errors", 0)),
            "test_runs": int(outcome.get("test_runs", 0)),
            "submitted": float(bool(outcome.get("submitted"))),
            "context_cut": float(self.context_cut),
        }

    def close(self) -> None:
        if self.episode is not None:
            self.episode.close()


_TOKENIZERS: Dict[str, Any] = {}
_TOKENIZERS_LOCK = threading.Lock()


def _tokenizer(spec: Any) -> Any:
    """A Hugging Face tokenizer: the object given, or loaded (once per process) from a path or name."""
    if not isinstance(spec, str):
        return spec
    with _TOKENIZERS_LOCK:
        if spec not in _TOKENIZERS:
            from transformers import AutoTokenizer

            _TOKENIZERS[spec] = AutoTokenizer.from_pretrained(spec)
        return _TOKENIZERS[spec]


class _ContextMeter:
    """The length of the token sequence SkyRL's generator feeds the model next (its
    ``SkyRLGymGenerator.agent_loop`` with ``use_conversation_multi_turn``): the initial chat
    with the generation prompt, then per turn the reply's tokens (the end-of-sequence token
    included) and the observation as the chat template renders it after a fixed base
    conversation."""

    def __init__(self, tokenizer: Any, max_input_length: int, margin: int):
        self.tokenizer = tokenizer
        self.max_input_length = max_input_length
        self.margin = margin
        base = self._template(_BASE_CONVERSATION, False)
        eos = tokenizer.eos_token_id
        if eos in base:  # what follows the last end-of-sequence belongs to the observation
            base = base[: len(base) - base[::-1].index(eos)]
        self.base_length = len(base)
        self.length = 0

    @classmethod
    def of(cls, config: Any) -> Optional["_ContextMeter"]:
        limit, spec = _option(config, "max_input_length", None), _option(config, "tokenizer", None)
        if limit is None and spec is None:
            return None
        if limit is None or spec is None:
            raise frognano.InvalidArgumentError(
                "max_input_length and tokenizer go together (the generator's generator.max_input_length and the "
                "policy's tokenizer): the environment counts the context's tokens with them")
        margin = _option(config, "length_margin", DEFAULT_LENGTH_MARGIN)
        if isinstance(margin, bool) or not isinstance(margin, int) or margin < 0:
            raise frognano.InvalidArgumentError(f"length_margin must be a non-negative integer, not {margin!r}")
        return cls(_tokenizer(spec), _positive_int(limit, "max_input_length"), margin)

    def _template(self, messages: List[Dict[str, Any]], generation_prompt: bool) -> List[int]:
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=generation_prompt, tokenize=True,
                                                 return_dict=False)
        return list(ids["input_ids"] if isinstance(ids, Mapping) else ids)

    def start(self, chat: List[Dict[str, Any]]) -> None:
        self.length = len(self._template(chat, True))

    def fits(self, action: str, observation: str) -> bool:
        """Adds a turn; whether the generator would still generate after it."""
        reply = len(self.tokenizer.encode(action, add_special_tokens=False)) + 1
        shown = self._template(_BASE_CONVERSATION + [{"role": "user", "content": observation}], True)
        self.length += reply + len(shown) - self.base_length
        return self.length + self.margin <= self.max_input_length


def register(env_id: str = ENV_ID, **kwargs: Any) -> str:
    """Registers FrogNanoTextEnv with skyrl-gym under env_id (kwargs: defaults of the
    constructor, e.g. env_config). Registering the same id again is a no-op; an id that
    another environment holds raises InvalidArgumentError. Returns env_id."""
    spec = skyrl_gym.registry.get(env_id)
    if spec is not None:
        if spec.entry_point in (ENTRY_POINT, FrogNanoTextEnv):
            return env_id
        raise frognano.InvalidArgumentError(
            f"skyrl-gym already has an environment {env_id!r} ({spec.entry_point}); pick another env_id")
    skyrl_gym.register(id=env_id, entry_point=ENTRY_POINT, kwargs=kwargs or None)
    return env_id


def dataset_rows(tasks: Tasks, *, env_class: str = ENV_ID, data_source: str = "frognano",
                 prompt: bool = True) -> List[Dict[str, Any]]:
    """SkyRL dataset rows, one per task: ``prompt`` (the chat: the task's opening observation
    as the user message; with prompt=False a short placeholder, which init() replaces),
    ``env_class``, ``data_source``, ``task`` (the task as JSON), ``task_id`` and a
    ``reward_spec`` (the reward is the sandboxed test run; ground_truth names the task)."""
    items = task_list(tasks)
    texts = first_prompts(items) if prompt else [f"Fix the bug of task {task['id']}." for task in items]
    rows = []
    for task, text in zip(items, texts):
        rows.append({
            "data_source": data_source,
            "prompt": [{"role": "user", "content": text}],
            "env_class": env_class,
            "task": task_json(task),
            "task_id": str(task["id"]),
            "reward_spec": {"method": "sandboxed_tests", "ground_truth": str(task["id"])},
        })
    return rows


__all__ = ["ENV_ID", "FrogNanoTextEnv", "dataset_rows", "register"]
