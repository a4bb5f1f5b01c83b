"""FrogNano tasks under verifiers' v1 API (verifiers >= 0.4, ``import verifiers.v1 as vf``): a
taskset, the harness that plays it, and the environment that pairs them. Loaded by
``frognano.integrations.verifiers`` when the installed verifiers is 0.4 or newer; its module
docstring says how to use it.

The v1 pieces, as verifiers composes them:

- ``FrogNanoTaskset`` (``vf.Taskset``) yields one ``FrogNanoTask`` per FrogNano task. The task's
  data carries the task as JSON and its opening observation (the problem statement and the tool
  instructions) as the prompt.
- ``FrogNanoTask`` (``vf.Task``): its ``setup`` opens the task's repository in the WASI sandbox
  (a ``TextEpisode``), its ``@vf.reward`` ``resolved`` grades the final repository with the
  task's tests (1.0 when resolved, else 0.0; it submits when the agent did not), and its
  ``@vf.metric`` ``valid_action_rate`` is the share of actions the environment understood.
- ``FrogNanoHarness`` (``vf.Harness``): the agent loop, run in-process. Every model call goes
  through the rollout's interception endpoint (so verifiers records the turns, and prime-rl's
  training client sees the tokens), with ``frognano.tool_schemas()`` as the OpenAI tools. A
  reply's tool calls are applied one by one and answered with tool messages; a reply without
  tool calls is applied as one text command (what a model without tool calling sends) and
  answered with a user message. The loop ends when the episode ends (``submit``, or the step
  budget), or when verifiers refuses a turn (``max_turns`` and its other limits).
- ``FrogNanoEnv`` (``vf.SingleAgentEnv``) whose config defaults the agent's runtime to the
  local subprocess runtime: the repository lives in FrogNano's sandbox, so a remote container
  per rollout would sit idle.

The repository must be where the harness and the reward run, so the episode lives in the
process that runs the rollout: other harnesses (``bash``, ``codex``, ...) cannot reach it, and a
FrogNano task under one fails its rollout with a ``vf.HarnessError`` that says so. FrogNano
failures are re-raised as verifiers' error types (``vf.TaskError`` for a task or repository
that cannot be opened, ``vf.SandboxError`` for a failing sandbox), so verifiers records them on
that rollout's trace and the other rollouts go on.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import sys
import threading
from typing import Any, Dict, Iterator, List, Optional, Union

import frognano

from ._common import Tasks, TextEpisode, first_prompt, require, task_json, task_list, task_of
from .curriculum import TaskSampler

vf = require("verifiers.v1", "verifiers")
openai = require("openai", "verifiers")

__all__ = [
    "FrogNanoData",
    "FrogNanoEnv",
    "FrogNanoEnvConfig",
    "FrogNanoHarness",
    "FrogNanoHarnessConfig",
    "FrogNanoState",
    "FrogNanoTask",
    "FrogNanoTaskset",
    "FrogNanoTasksetConfig",
    "TASKSET_ID",
    "TASKS_ENV_VAR",
    "load_environment",
    "verifiers_error",
]

# The plugin id of the taskset, the harness and the environment: verifiers imports a plugin by
# id as a top-level module (`frognano-env` -> `frognano_env`), which is what an environment
# package provides; `load_environment` makes the id resolve to this module in its process.
TASKSET_ID = "frognano-env"
# Where the taskset looks for a task-set path when it is given no tasks.
TASKS_ENV_VAR = "FROGNANO_TASKS"

# The live episode of each rollout, by trace id: opened by the task's setup, played by the
# harness, graded by the reward, dropped by the harness's cleanup (after scoring).
_EPISODES: Dict[str, TextEpisode] = {}
_EPISODES_LOCK = threading.Lock()


def verifiers_error(error: BaseException, what: str) -> Exception:
    """A FrogNano failure as the verifiers error type that names its boundary:
    ``vf.SandboxError`` for the sandbox or its assets (``SandboxFailure``, ``SetupError``),
    ``vf.TaskError`` for anything else FrogNano raises (a malformed task, a bug that does not
    apply, a missing repository). Raise it ``from`` the original."""
    kind = vf.SandboxError if isinstance(error, (frognano.SandboxFailure, frognano.SetupError)) else vf.TaskError
    return kind(f"{what}: {type(error).__name__}: {error}")


def _episode(trace: Any) -> Optional[TextEpisode]:
    with _EPISODES_LOCK:
        return _EPISODES.get(trace.id)


def _drop_episode(trace: Any) -> None:
    with _EPISODES_LOCK:
        episode = _EPISODES.pop(trace.id, None)
    if episode is not None:
        episode.close()


class FrogNanoData(vf.TaskData):
    """One FrogNano task as verifiers' task data: `task` is the task as JSON (what traces
    record), `max_steps` and `observation_chars` the episode's settings."""

    task: str
    max_steps: int = 30
    observation_chars: int = 6000


class FrogNanoState(vf.State):
    """What a rollout leaves on its trace: the graded `outcome` (task_id, resolved, reward and
    the episode's counters; None until graded; also in `trace.info["frognano"]`, which the
    saved traces keep), and the `actions` applied and how many of them the environment
    understood (`valid_actions`)."""

    outcome: Optional[Dict[str, Any]] = None
    actions: int = 0
    valid_actions: int = 0


class FrogNanoTask(vf.Task[FrogNanoData, FrogNanoState, vf.TaskConfig]):
    """A FrogNano task: `setup` opens its repository in the sandbox, `resolved` grades it."""

    # A TaskSampler told every graded outcome (set by the taskset; not task data).
    sampler: Optional[TaskSampler] = None

    @property
    def key(self) -> str:
        # The task id is durable; the data's autogenerated idx is not.
        return str(json.loads(self.data.task)["id"])

    async def setup(self, trace: Any) -> None:
        data = self.data
        try:
            episode = await asyncio.to_thread(
                TextEpisode, task_of(data.task), max_steps=data.max_steps,
                observation_chars=data.observation_chars)
        except frognano.FrognanoError as error:
            raise verifiers_error(error, f"opening task {self.key!r}") from error
        with _EPISODES_LOCK:
            _EPISODES[trace.id] = episode

    @vf.reward
    async def resolved(self, trace: Any) -> float:
        """1.0 when the task's tests pass on the final repository, else 0.0 (the repository is
        submitted if the agent did not; the tests run in the sandbox)."""
        episode = _episode(trace)
        if episode is None:
            if trace.state.outcome is not None:  # scored again after the rollout
                return float(trace.state.outcome["reward"])
            raise vf.TaskError(f"rollout {trace.id} has no FrogNano episode to grade (its setup did not run)")
        try:
            reward = await asyncio.to_thread(episode.finish)
        except frognano.FrognanoError as error:
            raise verifiers_error(error, f"grading task {self.key!r}") from error
        outcome = dict(episode.outcome or {"task_id": episode.task["id"]})
        outcome["reward"] = float(reward)
        outcome["resolved"] = bool(episode.resolved)
        trace.state.outcome = outcome
        trace.info["frognano"] = dict(outcome)  # the trace's info is what traces.jsonl keeps
        if self.sampler is not None:
            self.sampler.observe(outcome)
        return float(reward)

    @vf.metric
    async def valid_action_rate(self, trace: Any) -> float:
        """The share of the agent's actions the environment understood as a command."""
        state = trace.state
        return state.valid_actions / state.actions if state.actions else 0.0


class FrogNanoTasksetConfig(vf.TasksetConfig):
    """The taskset's settings (`--env.taskset.*`): `tasks` (a task-set path as
    frognano.load_tasks reads, or a list of tasks; default: the path in $FROGNANO_TASKS),
    the episode's `max_steps` and `observation_chars`."""

    id: str = TASKSET_ID
    tasks: Optional[Union[str, List[Dict[str, Any]]]] = None
    max_steps: int = 30
    observation_chars: int = 6000


class FrogNanoTaskset(vf.Taskset[FrogNanoTask, FrogNanoTasksetConfig]):
    """FrogNano tasks as a verifiers taskset. The tasks are checked when the taskset is made
    (TaskError / InvalidArgumentError); each task's prompt, its opening observation, is built
    as iteration reaches it. `sampler` (a TaskSampler) hears every graded outcome."""

    sampler: Optional[TaskSampler] = None

    def __init__(self, config: FrogNanoTasksetConfig) -> None:
        super().__init__(config)
        tasks = config.tasks
        if tasks is None:
            tasks = os.environ.get(TASKS_ENV_VAR) or None
            if tasks is None:
                raise frognano.InvalidArgumentError(
                    "the FrogNano taskset needs tasks: set --env.taskset.tasks (a task-set path) "
                    f"or ${TASKS_ENV_VAR}, or pass tasks= to load_environment")
        if config.max_steps < 1:
            raise frognano.InvalidArgumentError(f"max_steps must be at least 1, not {config.max_steps}")
        self.tasks = task_list(tasks)

    def load(self) -> Iterator[FrogNanoTask]:
        for task in self.tasks:
            prompt = first_prompt(task, self.config.observation_chars)
            item = FrogNanoTask(FrogNanoData(
                id=str(task["id"]), name=str(task["id"]), prompt=prompt, task=task_json(task),
                max_steps=self.config.max_steps, observation_chars=self.config.observation_chars,
            ), self.config.task)
            item.sampler = self.sampler
            yield item


class FrogNanoHarnessConfig(vf.HarnessConfig):
    """The harness's settings (`--env.agent.harness.*`): `tool_calls` sends
    frognano.tool_schemas() as the OpenAI tools (off: the model answers in text commands
    only); `request_timeout` bounds one model call, in seconds."""

    id: str = TASKSET_ID
    tool_calls: bool = True
    request_timeout: float = 600.0


def _arguments(raw: Optional[str]) -> Union[Dict[str, Any], str]:
    """A tool call's arguments as a dict; malformed JSON is passed on as text, so the
    environment answers it with its error observation."""
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return raw or ""
    return value if isinstance(value, dict) else (raw or "")


class FrogNanoHarness(vf.Harness[FrogNanoHarnessConfig]):
    """The agent loop over a FrogNano episode, in-process (see the module docstring)."""

    APPENDS_SYSTEM_PROMPT = True
    NEEDS_CONTAINER = False
    # The model's commands run in FrogNano's sandbox, never in the runtime.
    EXECUTES_CODE = False

    async def launch(self, ctx: Any, trace: Any, runtime: Any, endpoint: str, secret: str,
                     mcp_urls: Dict[str, str], data: Any, tool_interception_url: Optional[str] = None) -> Any:
        episode = _episode(trace)
        if episode is None:
            raise vf.HarnessError(
                f"rollout {trace.id} has no FrogNano episode: harness {self.config.id!r} plays "
                "FrogNano tasks only (their setup opens the repository)")
        system, prompt = self.resolve_prompt(data)
        messages: List[Dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        else:
            from verifiers.v1.dialects.chat import message_to_wire

            messages.extend(message_to_wire(message) for message in prompt or [])
        tools = frognano.tool_schemas() if self.config.tool_calls else None
        client = openai.AsyncOpenAI(base_url=endpoint, api_key=secret, max_retries=0,
                                    timeout=self.config.request_timeout)
        try:
            while not episode.done:
                try:
                    completion = await client.chat.completions.create(
                        model=ctx.model, messages=messages, **({"tools": tools} if tools else {}))
                except openai.APIStatusError:
                    if trace.stop_condition is not None:
                        break  # verifiers refused the turn (max_turns, a @stop): the run ends here
                    raise  # the rollout records the model's error it intercepted
                message = completion.choices[0].message
                messages.append(message.model_dump(exclude_none=True))
                if message.tool_calls:
                    for call in message.tool_calls:
                        action = {"name": call.function.name, "arguments": _arguments(call.function.arguments)}
                        observation = await self._step(episode, trace, action)
                        messages.append({"role": "tool", "tool_call_id": call.id, "content": observation})
                else:
                    observation = await self._step(episode, trace, message.content or "")
                    messages.append({"role": "user", "content": observation})
        finally:
            await client.close()
        return vf.ProgramResult(exit_code=0, stdout="", stderr="")

    async def _step(self, episode: TextEpisode, trace: Any, action: Any) -> str:
        try:
            observation, _reward, _done, info = await asyncio.to_thread(episode.step, action)
        except frognano.FrognanoError as error:
            raise verifiers_error(error, f"step {episode.steps + 1} of task {episode.task['id']!r}") from error
        trace.state.actions += 1
        trace.state.valid_actions += 0 if info.get("error") else 1
        return observation

    async def cleanup(self, trace: Any, runtime: Any) -> None:
        # After scoring (and after a failed rollout, which skips it): the workspace goes.
        await asyncio.to_thread(_drop_episode, trace)


class FrogNanoEnvConfig(vf.SingleAgentEnvConfig):
    """The environment's config: the one `agent` seat, by default on the local subprocess
    runtime (the harness runs in-process) with at most 10 model turns."""

    agent: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig(), max_turns=10)


class FrogNanoEnv(vf.SingleAgentEnv, vf.Env[FrogNanoEnvConfig]):
    """One agent playing a FrogNano task per episode (SingleAgentEnv with FrogNano's
    defaults)."""


def _register_plugin_module() -> None:
    """Makes the plugin id import this module where no `frognano_env` package is installed
    (verifiers resolves a taskset, its harness and its environment by importing the id)."""
    name = TASKSET_ID.replace("-", "_")
    if name not in sys.modules and importlib.util.find_spec(name) is None:
        sys.modules[name] = sys.modules[__name__]


_register_plugin_module()


def load_environment(
    tasks: Optional[Tasks] = None,
    *,
    max_turns: Optional[int] = 10,
    max_steps: Optional[int] = None,
    observation_chars: int = 6000,
    tool_calls: bool = True,
    sampler: Optional[TaskSampler] = None,
    **env: Any,
) -> "FrogNanoEnv":
    """A FrogNanoEnv over `tasks` (a task-set path or a list of tasks; default: the path in
    $FROGNANO_TASKS). `max_turns` caps the model turns of a rollout (None: no cap); the
    episode's step budget `max_steps` defaults to max_turns (30 when uncapped). `tool_calls`:
    send the tools to the model. `sampler` hears every graded rollout. Other keyword
    arguments are fields of FrogNanoEnvConfig (`agent=vf.AgentConfig(...)` replaces the seat:
    its max_turns and harness then come from it)."""
    if max_steps is None:
        max_steps = max_turns if max_turns else 30
    taskset: Dict[str, Any] = {"id": TASKSET_ID, "max_steps": max_steps, "observation_chars": observation_chars}
    if tasks is not None:
        # The config travels as data: a path as given, a list as task dicts.
        taskset["tasks"] = os.fspath(tasks) if isinstance(tasks, (str, os.PathLike)) else task_list(tasks)
    agent = env.pop("agent", None)
    if agent is None:
        agent = vf.AgentConfig(runtime=vf.SubprocessConfig(), max_turns=max_turns,
                               harness=FrogNanoHarnessConfig(tool_calls=tool_calls))
    config = FrogNanoEnvConfig(taskset=FrogNanoTasksetConfig(**taskset), agent=agent, **env)
    environment = vf.load_environment(config)
    environment.taskset.sampler = sampler
    return environment
