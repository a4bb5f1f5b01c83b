"""FrogNano as a GEM environment (gem-llm; tested with 0.1.0), registered as
``frognano:RepoRepair-v0`` so that ``gem.make`` and ``gem.make_vec`` build it: what the
trainers built on GEM (ROLL, rLLM) call with an env id from their configs.

``FrogNanoEnv`` is a ``gem.Env`` over FrogNano's ``RepoEnv``, text in and text out, as GEM's
own environments are: ``reset(seed)`` draws a task and returns ``(observation, info)``, the
observation being the problem statement and the tool instructions; ``step(action)`` applies
one command (text as the tool instructions describe, or a JSON tool call, or a dict
``{"name": ..., "arguments": {...}}``) and returns ``(observation, reward, terminated,
truncated, info)``. The reward is the task's grade: 1.0 on the submit whose tests pass,
0.0 otherwise; the episode is truncated (and graded) when its step budget runs out. A
malformed command is an observation with ``info["error"]`` set, and the episode goes on; a
step after the end raises ``frognano.EpisodeError`` (reset first), as in Gymnasium.

Task draws come from the env's own random generator (``seed`` as GEM passes it to each env
of ``make_vec``; ``reset(seed)`` reseeds it; the global ``random`` state is left alone), or
from a ``TaskSampler`` passed as ``sampler``, which also hears every graded episode. ``info``
carries ``task_id``, ``tool``, ``error`` and ``step``; the step that ends an episode adds the
graded ``outcome``.

>>> import gem
>>> import frognano.integrations.gem  # registers frognano:RepoRepair-v0
>>> env = gem.make("frognano:RepoRepair-v0", tasks="tasks.jsonl", max_steps=20, seed=0)
>>> observation, info = env.reset()
>>> observation, reward, terminated, truncated, info = env.step("test")

Registration happens when this module is imported (in a trainer, the module that names the
env id imports it); ``register(env_id, **defaults)`` registers the env under another id with
other defaults (tasks, max_steps, ...), and ``gem.make`` keyword arguments override them.
Without tasks the env reads the task-set path in ``$FROGNANO_TASKS``.
"""

from __future__ import annotations

import os
import random
from typing import Any, Dict, Mapping, Optional, Tuple

import frognano

from ._common import Tasks, require, shared_sandbox, task_list
from .curriculum import TaskSampler

gem = require("gem", "gem")
from gem.envs.registration import ENV_REGISTRY  # noqa: E402

__all__ = ["ENV_ID", "ENTRY_POINT", "FrogNanoEnv", "TASKS_ENV_VAR", "register"]

ENV_ID = "frognano:RepoRepair-v0"
ENTRY_POINT = "frognano.integrations.gem:FrogNanoEnv"
# Where the env looks for a task-set path when it is given no tasks.
TASKS_ENV_VAR = "FROGNANO_TASKS"

# Commands that are always well-formed and change nothing: what sample_random_action draws.
_RANDOM_COMMANDS = ("ls", "test", "view README.md", "search def", "undo")


class FrogNanoEnv(gem.Env):
    """A FrogNano task per episode, as a GEM text environment (see the module docstring).

    tasks: a task-set path or a list of tasks (default: $FROGNANO_TASKS); sampler: a
    TaskSampler to draw tasks from and to tell the graded outcomes; max_steps: the episode's
    step budget; observation_chars: the longest observation; seed: the task draws' seed.
    Other keyword arguments (what a trainer's config passes to every env) are ignored."""

    def __init__(self, tasks: Optional[Tasks] = None, *, sampler: Optional[TaskSampler] = None,
                 max_steps: int = 30, observation_chars: int = 6000, seed: Optional[int] = None,
                 sandbox: Optional["frognano.Sandbox"] = None, **_: Any):
        super().__init__()
        if tasks is None and sampler is None:
            tasks = os.environ.get(TASKS_ENV_VAR) or None
            if tasks is None:
                raise frognano.InvalidArgumentError(
                    f"{ENV_ID} needs tasks: pass tasks=<a task-set path or a list of tasks> or sampler= to "
                    f"gem.make, or set ${TASKS_ENV_VAR} to a task-set path")
        if max_steps < 1:
            raise frognano.InvalidArgumentError(f"max_steps must be at least 1, not {max_steps}")
        self.tasks = task_list(tasks) if tasks is not None else []
        self.sampler = sampler
        self.max_steps = max_steps
        self.observation_chars = observation_chars
        self.seed = seed
        self._settings = dict(tasks=self.tasks or None, sampler=sampler, max_steps=max_steps,
                              observation_chars=observation_chars, sandbox=sandbox)
        self._rng = random.Random(seed)
        self._env = frognano.RepoEnv(sandbox or shared_sandbox(), max_steps=max_steps,
                                     observation_chars=observation_chars)
        self.task: Optional[Dict[str, Any]] = None

    def reset(self, seed: Optional[int] = None) -> Tuple[str, Dict[str, Any]]:
        if seed is not None:
            self._rng = random.Random(seed)
        if self.sampler is not None:
            task = next(self.sampler)
        else:
            task = self.tasks[self._rng.randrange(len(self.tasks))]
        observation, info = self._env.reset(task)
        self.task = task
        return observation, {"task_id": str(task["id"]), "step": 0, "tool": None, "error": False}

    def step(self, action: Any) -> Tuple[str, float, bool, bool, Dict[str, Any]]:
        if not isinstance(action, (str, Mapping)):
            action = str(action)
        observation, reward, terminated, truncated, raw = self._env.step(action)
        info: Dict[str, Any] = {"task_id": str(raw.get("task_id") or (self.task or {}).get("id")),
                                "step": int(raw.get("step", 0)), "tool": raw.get("tool"),
                                "error": bool(raw.get("error"))}
        if terminated or truncated:
            outcome = dict(self._env.outcome or {"task_id": info["task_id"]})
            outcome["reward"] = float(outcome.get("reward", reward))
            outcome["resolved"] = bool(outcome.get("resolved"))
            info["outcome"] = outcome
            if self.sampler is not None:
                self.sampler.observe(outcome)
        return observation, float(reward), bool(terminated), bool(truncated), info

    def sample_random_action(self) -> str:
        """A well-formed command that changes nothing (listing, viewing, searching, testing)."""
        return self._rng.choice(_RANDOM_COMMANDS)

    def spawn(self, same_state: bool = False, **kwargs: Any) -> "FrogNanoEnv":
        """A new env with this one's settings (`kwargs` override them). An episode's repository
        is not copied, so same_state=True raises NotImplementedError."""
        if same_state:
            raise NotImplementedError("a FrogNano episode's workspace cannot be copied into a spawned env; "
                                      "spawn with same_state=False and reset it")
        return FrogNanoEnv(**{**self._settings, "seed": self._rng.randrange(2**31), **kwargs})

    def close(self) -> None:
        self._env.close()


def register(env_id: str = ENV_ID, **defaults: Any) -> str:
    """Registers FrogNanoEnv with GEM as `env_id` with these constructor defaults (tasks,
    max_steps, ...); registering the same id again with the same entry point is a no-op.
    Returns the id."""
    spec = ENV_REGISTRY.get(env_id)
    if spec is not None:
        if spec.entry_point == ENTRY_POINT and spec.kwargs == defaults:
            return env_id
        raise frognano.InvalidArgumentError(
            f"GEM env {env_id!r} is already registered (entry point {spec.entry_point}, defaults {spec.kwargs})")
    gem.register(env_id, ENTRY_POINT, **defaults)
    return env_id


register()
