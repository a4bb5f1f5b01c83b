"""FrogNano's environments as Gymnasium environments (tested with gymnasium 1.4.0).

``FrogNanoEnv`` is a ``gymnasium.Env`` over one ``RepoEnv``: observations and actions are text
(``gymnasium.spaces.Text``), an action is a tool-protocol command (``frognano.tool_instructions()``)
or a JSON tool call, and the reward is 1.0 when a submit resolves the task (graded by the task's
tests in the sandbox). ``FrogNanoVectorEnv`` is a ``gymnasium.vector.VectorEnv`` over an
``EnvPool``, stepping its environments in parallel.

>>> from frognano.integrations.gymnasium import FrogNanoEnv
>>> env = FrogNanoEnv("examples/tasks/sample.jsonl", max_steps=20)
>>> obs, info = env.reset(seed=0)                 # a task drawn with the seed
>>> obs, info = env.reset(options={"task": task})  # or the task given (a dict, JSON or an id)
>>> obs, reward, terminated, truncated, info = env.step("test")

Tasks come from a task-set path, a list of task dicts, or a ``TaskSampler`` (for instance over a
``FrontierSynthesizer``), which then hears every finished episode's outcome.

Text spaces hold a fixed character set: by default printable ASCII, tab, newline and U+FFFD.
Observation characters outside it are replaced by U+FFFD (``charset=`` widens it), and
observations longer than ``max_observation_length`` are cut with a marker. ``info`` holds no
timings or temporary paths, so that equal seeds and actions give equal results (the
workspace is ``env.workspace``).
"""

from __future__ import annotations

import string
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

import frognano

from ._common import Task, Tasks, require, task_list, task_of
from .curriculum import TaskSampler

gym = require("gymnasium", "gymnasium")
from gymnasium import spaces  # noqa: E402
from gymnasium.vector import AutoresetMode, VectorEnv  # noqa: E402
from gymnasium.vector.utils import batch_space  # noqa: E402

DEFAULT_CHARSET = frozenset(string.printable + "\ufffd")
REPLACEMENT = "\ufffd"
_CUT_MARKER = "\n[... observation cut ...]"
# Fields of the environment's info that change from run to run (timings, temporary paths).
_UNSTABLE_INFO = frozenset({"elapsed_ms", "duration_s", "workspace", "restored_files"})


def _stable(value: Any) -> Any:
    """A deep copy of an info value without timings and temporary paths."""
    if isinstance(value, Mapping):
        return {k: _stable(v) for k, v in value.items() if k not in _UNSTABLE_INFO}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


class _Tasks:
    """Where an environment's tasks come from: a fixed list (drawn with the env's seeded
    generator) or a TaskSampler (drawn in order, told of outcomes)."""

    def __init__(self, tasks: Optional[Tasks], sampler: Optional[TaskSampler]):
        if tasks is None and sampler is None:
            raise frognano.InvalidArgumentError("give tasks (a task-set path or a list) or a sampler")
        self.tasks: List[Task] = task_list(tasks) if tasks is not None else []
        self.by_id = {task["id"]: task for task in self.tasks}
        self.sampler = sampler

    def pick(self, rng: np.random.Generator, chosen: Any) -> Task:
        if chosen is not None:
            if isinstance(chosen, str) and chosen in self.by_id:
                return self.by_id[chosen]
            return task_of(chosen)
        if self.sampler is not None:
            try:
                return next(self.sampler)
            except StopIteration:
                raise frognano.InvalidArgumentError("the task sampler has no more tasks") from None
        return self.tasks[int(rng.integers(len(self.tasks)))]

    def observe(self, outcome: Optional[Dict[str, Any]]) -> None:
        if self.sampler is not None and outcome is not None:
            self.sampler.observe(outcome)


class _TextCodec:
    def __init__(self, charset: frozenset, max_observation_length: int):
        self.charset = charset
        self.max_length = max_observation_length

    def observation(self, text: str) -> str:
        if any(ch not in self.charset for ch in text):
            text = "".join(ch if ch in self.charset else REPLACEMENT for ch in text)
        if len(text) > self.max_length:
            keep = self.max_length - len(_CUT_MARKER)
            text = text[:keep] + _CUT_MARKER
        return text


def _text_spaces(charset: Optional[str], max_observation_length: int,
                 max_action_length: int) -> Tuple[_TextCodec, spaces.Text, spaces.Text]:
    """The observation codec and the observation and action spaces over the default charset
    plus `charset`."""
    chars = frozenset(charset) | DEFAULT_CHARSET if charset else DEFAULT_CHARSET
    return (_TextCodec(chars, max_observation_length),
            spaces.Text(max_length=max_observation_length, min_length=0, charset=chars),
            spaces.Text(max_length=max_action_length, min_length=1, charset=chars))


def _action(action: Any) -> Union[str, Dict[str, Any]]:
    if isinstance(action, (str, dict)):
        # Lone surrogates (from a random string) cannot cross into the environment.
        return action.encode("utf-8", "replace").decode("utf-8") if isinstance(action, str) else action
    if isinstance(action, np.str_):
        return str(action)
    raise frognano.InvalidArgumentError(
        f"an action is a str (a command) or a dict (a tool call), not {type(action).__name__}"
    )


class FrogNanoEnv(gym.Env):
    """One repository-repair environment as a ``gymnasium.Env`` (see the module's doc).

    tasks: a task-set path or a list of task dicts (a seeded reset draws one uniformly);
    sampler: a TaskSampler to draw from instead (and to report outcomes to).
    Other options: those of RepoEnv (sandbox, max_steps, max_observation_chars,
    observation_chars), charset, max_observation_length, max_action_length."""

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, tasks: Optional[Tasks] = None, *, sampler: Optional[TaskSampler] = None,
                 sandbox: Optional["frognano.Sandbox"] = None, max_steps: int = 30,
                 max_observation_chars: int = 120_000, observation_chars: int = 6_000,
                 charset: Optional[str] = None, max_observation_length: int = 32_768,
                 max_action_length: int = 16_384, render_mode: Optional[str] = None):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise frognano.InvalidArgumentError(f"render_mode must be None or 'ansi', not {render_mode!r}")
        self._tasks = _Tasks(tasks, sampler)
        self._codec, self.observation_space, self.action_space = _text_spaces(
            charset, max_observation_length, max_action_length)
        self.render_mode = render_mode
        self._env = frognano.RepoEnv(sandbox, max_steps=max_steps, max_observation_chars=max_observation_chars,
                                     observation_chars=observation_chars)
        self._observation: Optional[str] = None
        self._done = True

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> Tuple[str, Dict[str, Any]]:
        """Starts an episode: options["task"] (a task dict, its JSON or the id of one of the
        env's tasks), else a task drawn with the env's generator (or from its sampler)."""
        super().reset(seed=seed)
        task = self._tasks.pick(self.np_random, (options or {}).get("task"))
        observation, info = self._env.reset(task)
        self._observation = self._codec.observation(observation)
        self._done = False
        return self._observation, _stable(info)

    def step(self, action: Union[str, Dict[str, Any]]) -> Tuple[str, float, bool, bool, Dict[str, Any]]:
        if self._done:
            raise frognano.EpisodeError("the episode has ended: call reset() first")
        observation, reward, terminated, truncated, info = self._env.step(_action(action))
        self._observation = self._codec.observation(observation)
        if terminated or truncated:
            self._done = True
            self._tasks.observe(self._env.outcome)
            info = dict(info, outcome=self._env.outcome)
        return self._observation, float(reward), bool(terminated), bool(truncated), _stable(info)

    def render(self) -> Optional[str]:
        return self._observation if self.render_mode == "ansi" else None

    @property
    def workspace(self) -> Optional[str]:
        """The current episode's repository copy."""
        return self._env.workspace

    def record(self) -> Optional[Dict[str, Any]]:
        """The episode record (steps, tool calls, grading, the agent's diff)."""
        return self._env.record()

    def close(self) -> None:
        self._env.close()
        super().close()


class FrogNanoVectorEnv(VectorEnv):
    """``num_envs`` repository-repair environments stepped in parallel by an ``EnvPool`` (its
    own worker threads), as a ``gymnasium.vector.VectorEnv`` with next-step autoreset: the step
    after an episode ends resets that environment (its action is ignored) with a new task.

    Observations are tuples of strings. reset(options={"tasks": [...]}) starts the given tasks
    (one per environment). Other options as FrogNanoEnv's, plus workers (0: one per core)."""

    metadata = {"render_modes": [], "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int, tasks: Optional[Tasks] = None, *, sampler: Optional[TaskSampler] = None,
                 sandbox: Optional["frognano.Sandbox"] = None, workers: int = 0, max_steps: int = 30,
                 max_observation_chars: int = 120_000, observation_chars: int = 6_000,
                 charset: Optional[str] = None, max_observation_length: int = 32_768,
                 max_action_length: int = 16_384):
        if num_envs < 1:
            raise frognano.InvalidArgumentError("num_envs must be at least 1")
        self.num_envs = num_envs
        self._tasks = _Tasks(tasks, sampler)
        self._codec, self.single_observation_space, self.single_action_space = _text_spaces(
            charset, max_observation_length, max_action_length)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._pool = frognano.EnvPool(num_envs, sandbox, workers=workers, max_steps=max_steps,
                                      max_observation_chars=max_observation_chars,
                                      observation_chars=observation_chars)
        self._needs_reset = [True] * num_envs
        self._rng = np.random.default_rng()

    def reset(self, *, seed: Optional[Union[int, Sequence[int]]] = None,
              options: Optional[Dict[str, Any]] = None) -> Tuple[Tuple[str, ...], Dict[str, Any]]:
        if seed is not None:
            self._rng = np.random.default_rng(seed if isinstance(seed, int) else list(seed))
        chosen = (options or {}).get("tasks")
        if chosen is not None and len(chosen) != self.num_envs:
            raise frognano.InvalidArgumentError(f"options['tasks'] needs {self.num_envs} tasks, got {len(chosen)}")
        tasks = [self._tasks.pick(self._rng, chosen[i] if chosen is not None else None) for i in range(self.num_envs)]
        results = self._open_pool().reset(tasks)
        observations, infos = [], {}
        for i, (observation, info) in enumerate(results):
            observations.append(self._codec.observation(observation))
            infos = self._add_info(infos, _stable(info), i)
        self._needs_reset = [False] * self.num_envs
        return tuple(observations), infos

    def step(self, actions: Sequence[Union[str, Dict[str, Any]]]):
        pool = self._open_pool()
        actions = list(actions)
        if len(actions) != self.num_envs:
            raise frognano.InvalidArgumentError(f"{len(actions)} actions for {self.num_envs} environments")
        to_reset = [i for i in range(self.num_envs) if self._needs_reset[i]]
        resets: List[Optional[Task]] = [None] * self.num_envs
        for i in to_reset:
            resets[i] = self._tasks.pick(self._rng, None)
        reset_results = pool.reset(resets) if to_reset else [None] * self.num_envs
        step_results = pool.step([None if self._needs_reset[i] else _action(a) for i, a in enumerate(actions)])
        observations: List[str] = []
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminations = np.zeros(self.num_envs, dtype=np.bool_)
        truncations = np.zeros(self.num_envs, dtype=np.bool_)
        infos: Dict[str, Any] = {}
        records = None
        for i in range(self.num_envs):
            if reset_results[i] is not None:
                observation, info = reset_results[i]
                self._needs_reset[i] = False
            else:
                observation, reward, terminated, truncated, info = step_results[i]
                rewards[i], terminations[i], truncations[i] = reward, terminated, truncated
                if terminated or truncated:
                    self._needs_reset[i] = True
                    records = records if records is not None else pool.records()
                    outcome = (records[i] or {}).get("outcome")
                    self._tasks.observe(outcome)
                    info = dict(info, outcome=outcome)
            observations.append(self._codec.observation(observation))
            infos = self._add_info(infos, _stable(info), i)
        return tuple(observations), rewards, terminations, truncations, infos

    def records(self) -> List[Optional[Dict[str, Any]]]:
        """Each environment's current (or last) episode record."""
        return self._open_pool().records()

    def _open_pool(self) -> "frognano.EnvPool":
        if self._pool is None:
            raise frognano.EpisodeError("the vector environment is closed")
        return self._pool

    def close_extras(self, **kwargs: Any) -> None:
        """Frees the pool's environments and their workspaces (the EnvPool has no close() of its
        own: it releases them when its last reference goes, which this one is)."""
        self._pool = None


def make_env(tasks: Optional[Tasks] = None, **options: Any) -> FrogNanoEnv:
    """The entry point of the registered id ``frognano/RepoRepair-v0``:
    ``gymnasium.make("frognano/RepoRepair-v0", tasks=...)``."""
    return FrogNanoEnv(tasks, **options)


def make_vector_env(num_envs: int = 1, tasks: Optional[Tasks] = None, *, render_mode: Optional[str] = None,
                    **options: Any) -> FrogNanoVectorEnv:
    """The vector entry point of ``frognano/RepoRepair-v0``: ``gymnasium.make_vec(
    "frognano/RepoRepair-v0", num_envs=8, tasks=...)`` builds a FrogNanoVectorEnv, its
    environments stepped in parallel by one EnvPool (options as FrogNanoVectorEnv's; pass
    vectorization_mode="sync" or "async" for Gymnasium's wrappers of FrogNanoEnv instead)."""
    if render_mode is not None:
        raise frognano.InvalidArgumentError(f"FrogNanoVectorEnv renders nothing (render_mode={render_mode!r})")
    return FrogNanoVectorEnv(num_envs, tasks, **options)


if "frognano/RepoRepair-v0" not in gym.registry:
    gym.register(id="frognano/RepoRepair-v0", entry_point=make_env, vector_entry_point=make_vector_env,
                 nondeterministic=False)

__all__ = ["FrogNanoEnv", "FrogNanoVectorEnv", "DEFAULT_CHARSET", "make_env", "make_vector_env"]
