"""FrogNano tasks as a verifiers environment under the classic v0 API (``import verifiers as
vf``; tested with verifiers 0.3.1), for ``vf-eval`` and for trainers that drive verifiers
environments (prime-rl).

``FrogNanoEnv`` is a ``vf.MultiTurnEnv``: each dataset row is one task (its JSON in ``info``,
its opening observation, the problem statement and the tool instructions, as the user
message); a rollout opens a ``TextEpisode`` on the task, applies every assistant message as one
text action and answers with the environment's observation as the next user message. A
malformed action is no exception: the environment's error observation is the reply. The
rollout stops when the episode ends (``submit``, or the step budget) or after ``max_turns``
assistant turns; the action of the last turn is applied too, before grading. The rubric's
reward function ``resolved`` grades the final repository with the task's tests in the sandbox
(1.0 when resolved, else 0.0); ``valid_action_rate`` (weight 0) is the share of assistant
turns the environment understood as a command.

FrogNano failures are raised as verifiers' error types, which verifiers' rollout loop records
on the rollout's state (``state["error"]``) where any other exception would end the whole
evaluation: ``vf.SandboxError`` for a failing sandbox, ``vf.Error`` for a task or repository
that cannot be opened.

A ``TaskSampler`` passed as ``sampler`` hears every graded rollout (rollouts that ended in an
error are not reported). Where verifiers runs the environment in a server process of its own
(``Environment.start_server``), that process loads it again from its id and arguments, so hand
the sampler to an environment that runs in the trainer's process.

Loaded by ``frognano.integrations.verifiers`` when the installed verifiers is older than 0.4;
its module docstring shows how to run it.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, Callable, Dict, List, Optional

import frognano

from ._common import Tasks, TextEpisode, first_prompt, require, task_json, task_list, task_of_row
from .curriculum import TaskSampler

vf = require("verifiers", "verifiers")
# The v0 surface is loaded lazily by verifiers; load it here so that a broken install (a missing
# dependency of verifiers) fails now with the extra to install, not at the first attribute.
require("verifiers.legacy.envs.multiturn_env", "verifiers")
datasets = require("datasets", "verifiers")

__all__ = ["FrogNanoEnv", "FrogNanoRubric", "load_environment", "dataset_rows", "verifiers_error", "TASKS_ENV_VAR"]

# Where load_environment looks for a task-set path when it is given no tasks.
TASKS_ENV_VAR = "FROGNANO_TASKS"

# Keys of the rollout state this environment owns.
_EPISODE = "frognano_episode"
_APPLIED = "frognano_applied_turns"
_ACTIONS = "frognano_actions"
_VALID = "frognano_valid_actions"
_OUTCOME = "frognano_outcome"


def verifiers_error(error: BaseException, what: str) -> Exception:
    """A FrogNano failure as the verifiers error its rollout loop records: ``vf.SandboxError``
    for the sandbox or its assets (``SandboxFailure``, ``SetupError``), ``vf.Error`` for
    anything else (a malformed task or row, a bug that does not apply, a missing repository).
    Raise it ``from`` the original."""
    kind = vf.SandboxError if isinstance(error, (frognano.SandboxFailure, frognano.SetupError)) else vf.Error
    return kind(f"{what}: {type(error).__name__}: {error}")


def dataset_rows(tasks: Tasks, *, sandbox: Optional["frognano.Sandbox"] = None,
                 observation_chars: int = 6000) -> List[Dict[str, Any]]:
    """One verifiers dataset row per task: `prompt` (the task's opening observation as the user
    message, as an episode with these settings opens), `info` (the task as JSON; a string, so
    that tasks of different shapes share one Arrow column), `answer` (empty: the tests are the
    answer) and `task_id`."""
    rows = []
    for task in task_list(tasks):
        rows.append({
            "prompt": [{"role": "user", "content": first_prompt(task, observation_chars, sandbox)}],
            "info": task_json(task),
            "answer": "",
            "task_id": str(task["id"]),
        })
    return rows


def _message_text(message: Any) -> str:
    """The text of a chat message (a vf message object or a dict); content parts are joined."""
    content = message.get("content") if hasattr(message, "get") else getattr(message, "content", None)
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        text = part.get("text") if hasattr(part, "get") else getattr(part, "text", None)
        if isinstance(text, str):
            parts.append(text)
    return "".join(parts)


def _last_assistant_text(messages: Any) -> str:
    for message in reversed(list(messages or [])):
        role = message.get("role") if hasattr(message, "get") else getattr(message, "role", None)
        if role == "assistant":
            return _message_text(message)
    return ""


class FrogNanoRubric(vf.Rubric):
    """Grades a FrogNano rollout: `resolved` (weight 1) submits the final repository if the
    agent did not and runs the task's tests in the sandbox; `valid_action_rate` (weight 0) is
    the share of assistant turns that parsed as a command. Its cleanup closes the episode."""

    def __init__(self, *, sampler: Optional[TaskSampler] = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.sampler = sampler
        self.add_reward_func(self.resolved, weight=1.0)
        self.add_metric(self.valid_action_rate, weight=0.0)

    async def resolved(self, state: vf.State) -> float:
        episode: Optional[TextEpisode] = state.get(_EPISODE)
        if episode is None:
            return 0.0  # setup failed: there is no repository to grade
        if state.get(_OUTCOME) is None:
            # A rollout cut short by an error (the model server failing, say) is graded all the
            # same, but the curriculum does not hear it: it says nothing about the task.
            report = state.get("error") is None
            state[_OUTCOME] = await asyncio.to_thread(self._grade, episode, report)
        return float(state[_OUTCOME]["reward"])

    def _grade(self, episode: TextEpisode, report: bool) -> Dict[str, Any]:
        reward = episode.finish()  # a submit when the agent did not: the tests run in the sandbox
        outcome = dict(episode.outcome or {"task_id": episode.task["id"]})
        outcome["reward"] = float(reward)
        outcome["resolved"] = bool(episode.resolved)
        if report and self.sampler is not None:
            self.sampler.observe(outcome)
        return outcome

    async def valid_action_rate(self, state: vf.State) -> float:
        actions = int(state.get(_ACTIONS) or 0)
        return float(state.get(_VALID) or 0) / actions if actions else 0.0

    # verifiers runs a rubric's cleanup after scoring (and when scoring is off). An episode of a
    # rollout that raised before it is not leaked either: its workspace goes when it is dropped.
    @vf.cleanup
    async def close_episode(self, state: vf.State) -> None:
        episode: Optional[TextEpisode] = state.get(_EPISODE)
        if episode is not None:
            await asyncio.to_thread(episode.close)


class FrogNanoEnv(vf.MultiTurnEnv):
    """A verifiers MultiTurnEnv over FrogNano tasks (see the module docstring).

    tasks: a task-set path or a list of tasks (the dataset; `eval_tasks` for the eval dataset,
    by default the same). max_turns: assistant turns per rollout. max_steps: the episode's step
    budget (default: max_turns, or 30 when turns are unlimited). sampler: a TaskSampler told
    every graded outcome. Other keyword arguments go to vf.MultiTurnEnv (system_prompt,
    sampling_args, timeout_seconds, ...)."""

    def __init__(
        self,
        tasks: Tasks,
        *,
        eval_tasks: Optional[Tasks] = None,
        max_turns: int = 10,
        max_steps: Optional[int] = None,
        observation_chars: int = 6000,
        sandbox: Optional["frognano.Sandbox"] = None,
        sampler: Optional[TaskSampler] = None,
        rubric: Optional[vf.Rubric] = None,
        **kwargs: Any,
    ):
        # Validate now (a clear TaskError/InvalidArgumentError at load time); the prompts, which
        # open each task's repository, are built when verifiers first asks for the dataset.
        self.tasks = task_list(tasks)
        self.eval_tasks = task_list(eval_tasks) if eval_tasks is not None else None
        if max_steps is None:
            max_steps = max_turns if max_turns > 0 else 30
        if max_steps < 1:
            raise frognano.InvalidArgumentError(f"max_steps must be at least 1, not {max_steps}")
        self.max_steps = max_steps
        self.observation_chars = observation_chars
        self.sandbox = sandbox
        self.sampler = sampler
        train = _cached(lambda: self._dataset(self.tasks))
        evaluation = _cached(lambda: self._dataset(self.eval_tasks)) if self.eval_tasks is not None else train
        super().__init__(
            dataset=train,
            eval_dataset=evaluation,
            rubric=rubric or FrogNanoRubric(sampler=sampler),
            max_turns=max_turns,
            **kwargs,
        )

    def _dataset(self, tasks: List[Dict[str, Any]]) -> Any:
        rows = dataset_rows(tasks, sandbox=self.sandbox, observation_chars=self.observation_chars)
        return datasets.Dataset.from_list(rows)

    async def setup_state(self, state: vf.State) -> vf.State:
        try:
            task = task_of_row(state["input"])  # the task JSON in `info`
            episode = await asyncio.to_thread(
                TextEpisode, task, sandbox=self.sandbox, max_steps=self.max_steps,
                observation_chars=self.observation_chars,
            )
        except frognano.FrognanoError as error:
            raise verifiers_error(error, "opening the rollout's task") from error
        state[_EPISODE] = episode
        state[_APPLIED] = 0
        state[_ACTIONS] = 0
        state[_VALID] = 0
        state[_OUTCOME] = None
        return state

    async def _apply(self, state: vf.State, text: str) -> str:
        episode: TextEpisode = state[_EPISODE]
        try:
            observation, _reward, _done, info = await asyncio.to_thread(episode.step, text)
        except frognano.FrognanoError as error:
            raise verifiers_error(error, f"step {episode.steps + 1} of task {episode.task['id']!r}") from error
        state[_APPLIED] = len(state["trajectory"])
        state[_ACTIONS] += 1
        state[_VALID] += 0 if info.get("error") else 1
        if state["trajectory"]:
            state["trajectory"][-1]["extras"]["frognano"] = {"tool": info.get("tool"),
                                                             "error": bool(info.get("error"))}
        return observation

    async def env_response(self, messages: vf.Messages, state: vf.State, **kwargs: Any) -> vf.Messages:
        observation = await self._apply(state, _last_assistant_text(messages))
        reply: vf.Messages = [vf.UserMessage(content=observation)]
        if state[_EPISODE].done:
            # Ends the rollout here instead of asking the model once more.
            state["final_env_response"] = reply
        return reply

    @vf.stop
    async def episode_done(self, state: vf.State) -> bool:
        episode: Optional[TextEpisode] = state.get(_EPISODE)
        return episode is not None and episode.done

    # Before MultiTurnEnv's render_state (priority 100), so that the completion shows the reply.
    @vf.cleanup(priority=200)
    async def apply_last_turn(self, state: vf.State) -> None:
        """A rollout that ran out of turns ends after the model's last turn without an
        env_response; that turn's action is still the agent's, so it is applied before the
        rubric grades, and its observation ends the completion."""
        episode: Optional[TextEpisode] = state.get(_EPISODE)
        trajectory = state.get("trajectory") or []
        if episode is None or episode.done or state.get(_APPLIED, 0) >= len(trajectory):
            return
        try:
            observation = await self._apply(state, _last_assistant_text(trajectory[-1]["completion"]))
        except vf.Error as error:
            # Cleanup runs after verifiers' error handling: record the failure as it would.
            state["error"] = error
            return
        if state.get("final_env_response") is None:
            state["final_env_response"] = [vf.UserMessage(content=observation)]


def _cached(build: Callable[[], Any]) -> Callable[[], Any]:
    """A dataset builder that builds once (the train and eval datasets may share one)."""
    box: List[Any] = []

    def get() -> Any:
        if not box:
            box.append(build())
        return box[0]

    return get


def load_environment(
    tasks: Optional[Tasks] = None,
    *,
    max_turns: int = 10,
    sampler: Optional[TaskSampler] = None,
    **kwargs: Any,
) -> FrogNanoEnv:
    """The environment-package entry point: a FrogNanoEnv over `tasks` (a task-set path or a
    list of tasks; default: the path in $FROGNANO_TASKS). `sampler` hears every graded
    rollout. Other keyword arguments go to FrogNanoEnv (eval_tasks, max_steps,
    observation_chars, system_prompt, sampling_args, ...)."""
    if tasks is None:
        tasks = os.environ.get(TASKS_ENV_VAR) or None
        if tasks is None:
            raise frognano.InvalidArgumentError(
                "load_environment needs tasks: pass tasks=<a task-set path or a list of tasks> "
                f"(a FrogNano package ships no task set of its own) or set ${TASKS_ENV_VAR} to a "
                "task-set path"
            )
    return FrogNanoEnv(tasks, max_turns=max_turns, sampler=sampler, **kwargs)
