"""FrogNano environments served over OpenEnv's HTTP/WebSocket API (openenv-core; tested with
0.3.0), for the trainers and tools that drive OpenEnv environments (TRL's OpenEnv support,
verifiers' OpenEnv taskset, OpenEnv's own clients).

OpenEnv serves an ``Environment`` subclass through ``openenv.core.create_app``: one
environment instance per WebSocket session (``/ws``: ``reset``, ``step``, ``state``; what
OpenEnv's ``EnvClient`` speaks), plus ``/health``, ``/schema``, ``/metadata`` and the
stateless HTTP ``/reset`` (a fresh instance per request). This module provides:

- ``FrogNanoEnvironment``, the OpenEnv ``Environment``: ``reset(seed=, episode_id=, task_id=)``
  opens a task's repository in FrogNano's WASI sandbox (the task named by ``task_id``, else a
  draw seeded by ``seed``, else the next task: from the ``TaskSampler`` when there is one, in
  turn from the task list otherwise); ``step(FrogNanoAction)`` applies one command;
  ``state`` is the episode's ``FrogNanoState``.
- ``FrogNanoAction`` (one field, ``command``: a text command as the tool instructions describe,
  or a JSON tool call ``{"name": ..., "arguments": {...}}``; ``FrogNanoAction.tool_call(name,
  **arguments)`` writes the latter), ``FrogNanoObservation`` (``text``, ``task_id``, ``step``,
  ``tool``, ``error``, and the graded ``outcome`` when the episode ends; ``reward`` and
  ``done`` as OpenEnv has them: 1.0 on the step whose submit resolves the task) and
  ``FrogNanoState``.
- ``create_app(tasks, ...)``, the FastAPI app (``uvicorn module:app``, or any ASGI server),
  ``serve_openenv(tasks, host, port)`` to serve it from Python until interrupted, and
  ``start_server(tasks, ...)``, the same in a background thread (a context manager with its
  ``url``).
- ``FrogNanoEnvClient``, OpenEnv's ``EnvClient`` typed for these models (any OpenEnv client
  works, ``GenericEnvClient`` with plain dicts included).

>>> from frognano.integrations.openenv import FrogNanoAction, FrogNanoEnvClient, start_server
>>> with start_server("tasks.jsonl", port=0) as server:
...     with FrogNanoEnvClient(base_url=server.url).sync() as env:
...         result = env.reset(seed=0)
...         result = env.step(FrogNanoAction(command="test"))
...         result = env.step(FrogNanoAction.tool_call("view", path="README.md"))

A malformed command is no error: the observation says what went wrong (``error`` true) and the
episode goes on. A step before any reset, or an unknown ``task_id``, is an error of that
request (OpenEnv's client raises it with FrogNano's message). Tasks: a task-set path as
``frognano.load_tasks`` reads or a list of task dicts / task JSON strings (default: the path
in ``$FROGNANO_TASKS``); clients choose among the server's tasks and cannot send their own
(a task names a repository on the server's disk). A ``TaskSampler`` passed as ``sampler``
hears every graded episode.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import socket
import threading
import uuid
from typing import Any, Dict, Optional

import frognano

from ._common import Tasks, TextEpisode, require, task_list
from .curriculum import TaskSampler

openenv_core = require("openenv.core", "openenv")
pydantic = require("pydantic", "openenv")
uvicorn = require("uvicorn", "openenv")

from openenv.core import Action, EnvClient, Environment, Observation, State  # noqa: E402
from openenv.core.client_types import StepResult  # noqa: E402
from openenv.core.env_server.types import EnvironmentMetadata  # noqa: E402

__all__ = [
    "FrogNanoAction",
    "FrogNanoEnvClient",
    "FrogNanoEnvironment",
    "FrogNanoObservation",
    "FrogNanoState",
    "OpenEnvServer",
    "TASKS_ENV_VAR",
    "create_app",
    "serve_openenv",
    "start_server",
]

# Where the server looks for a task-set path when it is given no tasks.
TASKS_ENV_VAR = "FROGNANO_TASKS"


class FrogNanoAction(Action):
    """One command for the environment: text as the tool instructions describe (``view
    src/a.py``, an ``edit`` block, ``test``, ``submit``) or a JSON tool call."""

    command: str = pydantic.Field(
        ..., description='One command as text (see the tool instructions in the first observation), or a JSON '
                         'tool call {"name": ..., "arguments": {...}} of frognano.tool_schemas()')

    @classmethod
    def tool_call(cls, name: str, **arguments: Any) -> "FrogNanoAction":
        """The action calling tool `name` with `arguments` (frognano.tool_schemas() lists them)."""
        return cls(command=json.dumps({"name": name, "arguments": arguments}))


class FrogNanoObservation(Observation):
    """What the environment answers: `text` (the observation the agent reads; after reset the
    problem statement and the tool instructions), the `task_id`, the `step` number, the `tool`
    the command was parsed as (None when it was not understood), `error` (the command failed
    or was malformed) and, on the step that ends the episode, the graded `outcome`."""

    text: str = ""
    task_id: str = ""
    step: int = 0
    tool: Optional[str] = None
    error: bool = False
    outcome: Optional[Dict[str, Any]] = None


class FrogNanoState(State):
    """The episode's state: OpenEnv's `episode_id` and `step_count`, the `task_id`, whether the
    episode is `done`, its `total_reward` and (once graded) whether it `resolved` the task."""

    task_id: Optional[str] = None
    done: bool = False
    total_reward: float = 0.0
    resolved: Optional[bool] = None


class _TaskPicker:
    """The task source every session of one server shares: by id, by seed, from a sampler, or
    in turn from the list."""

    def __init__(self, tasks: Optional[Tasks], sampler: Optional[TaskSampler]):
        if tasks is None and sampler is None:
            tasks = os.environ.get(TASKS_ENV_VAR) or None
            if tasks is None:
                raise frognano.InvalidArgumentError(
                    "the OpenEnv server needs tasks: pass tasks=<a task-set path or a list of tasks> or "
                    f"sampler=, or set ${TASKS_ENV_VAR} to a task-set path")
        self.tasks = task_list(tasks) if tasks is not None else []
        self.by_id = {str(task["id"]): task for task in self.tasks}
        self.sampler = sampler
        self._turn = itertools.count()
        self._lock = threading.Lock()

    def pick(self, seed: Optional[int], task_id: Optional[str]) -> Dict[str, Any]:
        if task_id is not None:
            task = self.by_id.get(str(task_id))
            if task is None:
                known = ", ".join(sorted(self.by_id)[:10]) or "none: the server draws from a sampler"
                raise frognano.InvalidArgumentError(f"no task {task_id!r} on this server (its tasks: {known})")
            return task
        if seed is not None and self.tasks:
            return self.tasks[random.Random(seed).randrange(len(self.tasks))]
        if self.sampler is not None:
            return next(self.sampler)
        with self._lock:
            return self.tasks[next(self._turn) % len(self.tasks)]


class FrogNanoEnvironment(Environment):
    """FrogNano's RepoEnv as an OpenEnv Environment (see the module docstring). One instance
    is one session's environment; the server makes one per WebSocket connection."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # each instance has its own episode and workspace

    def __init__(self, tasks: Optional[Tasks] = None, *, sampler: Optional[TaskSampler] = None,
                 max_steps: int = 30, observation_chars: int = 6000,
                 sandbox: Optional["frognano.Sandbox"] = None, _picker: Optional[_TaskPicker] = None):
        super().__init__()
        if max_steps < 1:
            raise frognano.InvalidArgumentError(f"max_steps must be at least 1, not {max_steps}")
        self.picker = _picker or _TaskPicker(tasks, sampler)
        self.max_steps = max_steps
        self.observation_chars = observation_chars
        self.sandbox = sandbox
        self.episode: Optional[TextEpisode] = None
        self._state = FrogNanoState()

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None,
              task_id: Optional[str] = None, **kwargs: Any) -> FrogNanoObservation:
        task = self.picker.pick(seed, task_id)
        self.close()
        self.episode = TextEpisode(task, sandbox=self.sandbox, max_steps=self.max_steps,
                                   observation_chars=self.observation_chars)
        self._state = FrogNanoState(episode_id=episode_id or uuid.uuid4().hex, task_id=str(task["id"]))
        return FrogNanoObservation(text=self.episode.observation, task_id=str(task["id"]), done=False, reward=0.0)

    def step(self, action: FrogNanoAction, timeout_s: Optional[float] = None, **kwargs: Any) -> FrogNanoObservation:
        episode = self.episode
        if episode is None:
            raise frognano.EpisodeError("step before reset: reset the environment to open a task first")
        if not isinstance(action, FrogNanoAction):  # a plain dict from a generic caller
            action = FrogNanoAction.model_validate(action)
        was_done = episode.done
        text, reward, done, info = episode.step(action.command)
        state = self._state
        if not was_done:
            state.step_count += 1
            state.total_reward += reward
        outcome = None
        if done and not was_done:
            outcome = dict(episode.outcome or {"task_id": episode.task["id"]})
            outcome["reward"] = float(episode.reward)
            outcome["resolved"] = bool(episode.resolved)
            state.resolved = outcome["resolved"]
            if self.picker.sampler is not None:
                self.picker.sampler.observe(outcome)
        state.done = done
        return FrogNanoObservation(text=text, task_id=str(episode.task["id"]), step=episode.steps,
                                   tool=info.get("tool"), error=bool(info.get("error")), outcome=outcome,
                                   done=done, reward=float(reward))

    @property
    def state(self) -> FrogNanoState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="frognano", version=getattr(frognano, "__version__", None),
            description="Repair a Python repository so that its tests pass: FrogNano's tasks in its WASI "
                        "sandbox, graded by the task's tests (reward 1.0 on the submit that resolves it).",
            readme_content=frognano.tool_instructions())

    def close(self) -> None:
        if self.episode is not None:
            self.episode.close()
            self.episode = None


def create_app(tasks: Optional[Tasks] = None, *, sampler: Optional[TaskSampler] = None, max_steps: int = 30,
               observation_chars: int = 6000, max_concurrent_envs: int = 8,
               sandbox: Optional["frognano.Sandbox"] = None) -> Any:
    """OpenEnv's FastAPI app serving FrogNanoEnvironment over `tasks` (checked now: TaskError /
    InvalidArgumentError), at most `max_concurrent_envs` WebSocket sessions at once. Built by
    openenv.core.create_app, so $ENABLE_WEB_INTERFACE adds OpenEnv's web UI where gradio is
    installed."""
    picker = _TaskPicker(tasks, sampler)

    def factory() -> FrogNanoEnvironment:
        return FrogNanoEnvironment(max_steps=max_steps, observation_chars=observation_chars, sandbox=sandbox,
                                   _picker=picker)

    factory()  # the settings are checked once now, not at the first connection
    return openenv_core.create_app(factory, FrogNanoAction, FrogNanoObservation, env_name="frognano",
                                   max_concurrent_envs=max_concurrent_envs)


def serve_openenv(tasks: Optional[Tasks] = None, host: str = "127.0.0.1", port: int = 8000, **kwargs: Any) -> None:
    """Serves create_app(tasks, **kwargs) on host:port until interrupted (what an OpenEnv
    environment's `server/app.py` runs)."""
    uvicorn.run(create_app(tasks, **kwargs), host=host, port=port, log_level="warning")


class OpenEnvServer:
    """The app served by uvicorn in a background thread: `url` (http://host:port), `close()`;
    a context manager. Made by start_server."""

    def __init__(self, app: Any, host: str, port: int):
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, port))
        self.host, self.port = self._socket.getsockname()[:2]
        self.url = f"http://{self.host}:{self.port}"
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        self._thread = threading.Thread(target=self._run, name="frognano-openenv", daemon=True)
        self._failure: Optional[BaseException] = None
        self._thread.start()
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError(f"the OpenEnv server did not start: {self._failure!r}")
            self._thread.join(0.02)

    def _run(self) -> None:
        try:
            asyncio.run(self._server.serve(sockets=[self._socket]))
        except BaseException as error:  # reported by __init__ when it never started
            self._failure = error

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)
        self._socket.close()

    def __enter__(self) -> "OpenEnvServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def start_server(tasks: Optional[Tasks] = None, *, host: str = "127.0.0.1", port: int = 0,
                 **kwargs: Any) -> OpenEnvServer:
    """create_app(tasks, **kwargs) served in a background thread on host:port (0: a free
    port); returns once it accepts connections."""
    return OpenEnvServer(create_app(tasks, **kwargs), host, port)


class FrogNanoEnvClient(EnvClient):
    """OpenEnv's EnvClient for a FrogNano server: FrogNanoAction in, FrogNanoObservation and
    FrogNanoState out. Async (``async with``); ``.sync()`` gives OpenEnv's synchronous
    wrapper."""

    def _step_payload(self, action: Any) -> Dict[str, Any]:
        if isinstance(action, str):
            action = FrogNanoAction(command=action)
        return action.model_dump(exclude={"metadata"}) if isinstance(action, FrogNanoAction) else dict(action)

    def _parse_result(self, payload: Dict[str, Any]) -> StepResult:
        observation = FrogNanoObservation(**payload.get("observation", {}), done=payload.get("done", False),
                                          reward=payload.get("reward"))
        return StepResult(observation=observation, reward=payload.get("reward"), done=payload.get("done", False))

    def _parse_state(self, payload: Dict[str, Any]) -> FrogNanoState:
        return FrogNanoState(**payload)
