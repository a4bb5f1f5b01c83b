"""What every trainer adapter shares: the framework import check, task lists and rows, a
process-wide sandbox, and one text episode over a RepoEnv."""

from __future__ import annotations

import importlib
import json
import os
import threading
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

import frognano

# The version of each framework the adapters are tested against (and the extra that installs it).
TESTED_VERSIONS: Dict[str, tuple] = {
    "gymnasium": ("gymnasium", "1.4.0"),
    "trl": ("trl", "1.16.0"),
    "verl": ("verl", "0.9.1"),
    "skyrl": ("skyrl-gym", "0.4.0"),
    "verifiers": ("verifiers", "0.3.1"),
    "openrlhf": ("openrlhf", "0.11.2"),
}

Task = Dict[str, Any]
TaskLike = Union[Task, str]
Tasks = Union[str, "os.PathLike[str]", Sequence[TaskLike], Task]


def require(module: str, extra: str):
    """Imports `module` of the framework behind `frognano.integrations.<extra>`, or raises an
    ImportError that names the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        distribution, version = TESTED_VERSIONS[extra]
        raise ImportError(
            f"frognano.integrations.{extra} needs {distribution} (tested with {version}), which "
            f"could not be imported ({error}); install it with: pip install 'frognano[{extra}]'",
            name=module,
        ) from error


def task_list(tasks: Tasks) -> List[Task]:
    """Tasks as dicts, from a task-set path (JSONL, as frognano.load_tasks reads), one task
    dict, or a sequence of task dicts / task JSON strings. Raises TaskError on a malformed task
    and InvalidArgumentError on anything else."""
    if isinstance(tasks, (str, os.PathLike)):
        return frognano.load_tasks(tasks)
    if isinstance(tasks, Mapping):
        tasks = [tasks]
    if not isinstance(tasks, Iterable):
        raise frognano.InvalidArgumentError(
            f"tasks must be a task-set path, a task dict or a list of tasks, not {type(tasks).__name__}"
        )
    out = [task_of(item) for item in tasks]
    if not out:
        raise frognano.InvalidArgumentError("the task list is empty")
    return out


def task_of(value: Any) -> Task:
    """One task from a dict or a JSON string (a dataset row's `task` column holds one)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as error:
            raise frognano.TaskError(f"a task string is not JSON: {error}") from error
    if not isinstance(value, Mapping):
        raise frognano.TaskError(f"a task must be a dict or a JSON string, not {type(value).__name__}")
    task = dict(value)
    for field in ("id", "repo"):
        if field not in task:
            raise frognano.TaskError(f"the task has no `{field}` field (keys: {sorted(task)})")
    return task


def task_of_row(row: Mapping[str, Any], key: str = "task") -> Task:
    """The task a trainer's dataset row carries: its `task` column (a JSON string or a dict),
    `extra_info`/`info`/`extras` holding one, or the row itself when it is a task."""
    if not isinstance(row, Mapping):
        raise frognano.TaskError(f"a dataset row must be a dict, not {type(row).__name__}")
    if key in row and row[key] is not None:
        return task_of(row[key])
    for nested in ("extra_info", "info", "extras", "env_extras", "label"):
        inner = row.get(nested)
        if isinstance(inner, str) and inner.lstrip().startswith("{"):
            try:
                inner = json.loads(inner)
            except json.JSONDecodeError:
                continue
        if isinstance(inner, Mapping) and (key in inner or "repo" in inner):
            return task_of_row(inner, key) if key in inner else task_of(inner)
    if "id" in row and "repo" in row:
        return task_of(row)
    raise frognano.TaskError(
        f"the row carries no task: expected a `{key}` column (the task as JSON) or extra_info/"
        f"info/extras holding one; the row's keys are {sorted(row)}"
    )


def task_json(task: TaskLike) -> str:
    """A task as the compact JSON string dataset columns carry."""
    return json.dumps(task_of(task), separators=(",", ":"), sort_keys=True)


_SANDBOX_LOCK = threading.Lock()
_SANDBOX: Optional["frognano.Sandbox"] = None


def shared_sandbox() -> "frognano.Sandbox":
    """One Sandbox for the process (created on first use; sandboxes are thread-safe)."""
    global _SANDBOX
    with _SANDBOX_LOCK:
        if _SANDBOX is None:
            _SANDBOX = frognano.Sandbox()
        return _SANDBOX


class TextEpisode:
    """One episode of a task in a RepoEnv driven by text actions, as the text-in/text-out
    trainers (SkyRL, OpenRLHF, verifiers, TRL's environment_factory) want it.

    Malformed actions are not exceptions: the environment answers them with an error
    observation and the episode goes on. `finish()` grades the final repository (submits when
    the agent did not), so every episode's reward comes from a sandboxed test run."""

    def __init__(self, task: TaskLike, *, sandbox: Optional["frognano.Sandbox"] = None,
                 max_steps: int = 30, observation_chars: int = 6000):
        self.task = task_of(task)
        self.env = frognano.RepoEnv(sandbox or shared_sandbox(), max_steps=max_steps,
                                    observation_chars=observation_chars)
        self.observation, self.info = self.env.reset(self.task)
        self.reward = 0.0
        self.done = False
        self.steps = 0
        self.last_info: Dict[str, Any] = dict(self.info)

    def step(self, action: Union[str, Mapping[str, Any]]):
        """Applies one action; returns (observation, reward, done, info). After the end it
        returns the end's observation again with done=True."""
        if self.done:
            return "The episode has ended.", 0.0, True, dict(self.last_info)
        if not isinstance(action, (str, Mapping)):
            action = str(action)
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        self.reward += float(reward)
        self.done = bool(terminated or truncated)
        self.last_info = info
        return observation, float(reward), self.done, info

    def finish(self) -> float:
        """Grades the episode if it is still open (a submit) and returns its total reward."""
        if not self.done:
            self.step("submit")
        return self.reward

    @property
    def resolved(self) -> bool:
        outcome = self.env.outcome
        return bool(outcome and outcome.get("resolved"))

    @property
    def outcome(self) -> Optional[Dict[str, Any]]:
        return self.env.outcome

    def record(self) -> Optional[Dict[str, Any]]:
        return self.env.record()

    def close(self) -> None:
        self.env.close()


def first_prompt(task: TaskLike) -> str:
    """The opening observation of a task (its problem statement and the tool instructions), as
    the first user message of a chat."""
    episode = TextEpisode(task)
    try:
        return episode.observation
    finally:
        episode.close()
