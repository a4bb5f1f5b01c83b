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
``environment.skyrl_gym.frognano`` (``max_turns``, ``observation_chars``); call ``register()``
in the process that builds the environments before training starts (SkyRL's examples register
their environments in the Ray entry point).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

import frognano

from ._common import TextEpisode, Tasks, first_prompt, require, task_json, task_list, task_of_row

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

    env_config: ``max_turns`` (the agent's turn budget; the episode is graded when it ends,
    default 30; ``max_steps`` is accepted as an alias) and ``observation_chars`` (how much of a
    tool's output one observation shows, default 6000). A row's extras may override
    ``max_turns`` too. extras: the dataset row; it must carry the task (a ``task`` column with
    the task as JSON, as ``dataset_rows`` writes it, or extra_info/extras holding one). Raises
    TaskError when it does not."""

    def __init__(self, env_config: Any = None, extras: Optional[Mapping[str, Any]] = None,
                 *, sandbox: Optional["frognano.Sandbox"] = None):
        super().__init__()
        extras = {} if extras is None else extras
        self.task: Dict[str, Any] = task_of_row(extras)
        turns = _option(extras, "max_turns", None)
        if turns is None:
            turns = _option(env_config, "max_turns", _option(env_config, "max_steps", DEFAULT_MAX_TURNS))
        self.max_turns = _positive_int(turns, "max_turns")
        self.observation_chars = _positive_int(
            _option(env_config, "observation_chars", DEFAULT_OBSERVATION_CHARS), "observation_chars")
        self.sandbox = sandbox
        self.episode: Optional[TextEpisode] = None
        self.turns = 0
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
        self._reported = 0.0
        # The RepoEnv's own step limit is the turn budget: its last step is graded.
        self.episode = TextEpisode(self.task, sandbox=self.sandbox, max_steps=self.max_turns,
                                   observation_chars=self.observation_chars)
        system = [dict(m) for m in (prompt or []) if isinstance(m, Mapping) and m.get("role") == "system"]
        chat = system + [{"role": "user", "content": self.episode.observation}]
        return chat, {"task_id": self.task_id, "max_turns": self.max_turns}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        """Applies one reply of the model as a tool command. The reward is 0 until the end;
        the step that ends the episode (a submit or the last turn) returns the graded reward
        and no observation."""
        episode = self.episode
        if episode is None:
            raise frognano.EpisodeError("FrogNanoTextEnv.step() before init(): call init(prompt) first")
        if episode.done:
            raise frognano.EpisodeError("the episode has ended; init() a new one")
        if not isinstance(action, str):
            action = "" if action is None else str(action)
        self.turns += 1
        observation, _, done, info = episode.step(action)
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
        return BaseTextEnvStepOutput(
            observations=[] if done else [{"role": "user", "content": observation}],
            reward=float(reward),
            done=bool(done),
            metadata=metadata,
        )

    def get_metrics(self) -> Dict[str, Any]:
        """Per-episode numbers (SkyRL averages them over episodes)."""
        outcome = (self.episode.outcome if self.episode is not None else None) or {}
        return {
            "turns": self.turns,
            "resolved": float(bool(outcome.get("resolved"))),
            "reward": float(self.episode.reward) if self.episode is not None else 0.0,
            "tool_errors": int(outcome.get("tool_errors", 0)),
            "test_runs": int(outcome.get("test_runs", 0)),
            "submitted": float(bool(outcome.get("submitted"))),
        }

    def close(self) -> None:
        if self.episode is not None:
            self.episode.close()


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
    rows = []
    for task in task_list(tasks):
        text = first_prompt(task) if prompt else f"Fix the bug of task {task['id']}."
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
