"""The curriculum as a service: any FrogNano task source (the online FrontierSynthesizer, the
static baselines, or your own object with propose/feedback) as a thread-safe iterator of tasks
with an `observe(results)` feedback call and a picklable state, so that any trainer's data
loader can draw from the frontier of learnability and report back.

>>> sampler = TaskSampler.frontier(["examples/repos/textkit"], seed=0)
>>> task = next(sampler)                      # a task dict (load_tasks' shape)
>>> sampler.observe([{"task_id": task["id"], "reward": 1.0}])
>>> state = pickle.dumps(sampler)             # the source's state travels with it

It is also a prime-rl-style task sampler: `__next__()` draws, `observe(group)` takes the
rollouts of one task (dicts with a reward) and moves the frontier.
"""

from __future__ import annotations

import collections
import threading
from typing import Any, Deque, Dict, List, Mapping, Optional, Sequence

import frognano

from ._common import Task, Tasks, task_list, task_of, task_of_row

_SOURCES = {
    "frontier": lambda args, kwargs: frognano.FrontierSynthesizer(None, *args, **kwargs),
    "static": lambda args, kwargs: frognano.StaticCurriculum(*args, **kwargs),
    "easy_to_hard": lambda args, kwargs: frognano.EasyToHard(*args, **kwargs),
}


class TaskSampler:
    """A thread-safe iterator of tasks drawn from a task source, with feedback.

    source: a FrontierSynthesizer, StaticCurriculum, EasyToHard, any object with
    propose(n) and feedback(outcomes) (metrics/state/load_state optional), or tasks (a task-set
    path or a list of task dicts), which become a seeded StaticCurriculum.
    batch: how many tasks one propose() call asks the source for.
    repeat: how many consecutive draws return the same task (a trainer's group of G rollouts).

    Picklable when it was built from tasks or by frontier()/static()/easy_to_hard() (the source
    is rebuilt from its recipe and given its saved state; a FrontierSynthesizer's repositories
    must be at the same paths), or when the source itself pickles."""

    def __init__(self, source: Any, *, batch: int = 8, repeat: int = 1, seed: int = 0):
        if batch < 1 or repeat < 1:
            raise frognano.InvalidArgumentError("batch and repeat must be at least 1")
        self._recipe: Optional[tuple] = None
        if not (hasattr(source, "propose") and hasattr(source, "feedback")):
            tasks = task_list(source)
            self._recipe = ("static", (tasks,), {"seed": seed})
            source = frognano.StaticCurriculum(tasks, seed=seed)
        self._init(source, batch, repeat)

    def _init(self, source: Any, batch: int, repeat: int) -> None:
        self.source = source
        self.batch = batch
        self.repeat = repeat
        self._lock = threading.RLock()
        self._queue: Deque[Task] = collections.deque()
        self._current: Optional[Task] = None
        self._left_of_current = 0
        self._drawn = 0
        self._observed = 0

    @classmethod
    def _from_recipe(cls, kind: str, args: tuple, kwargs: dict, batch: int, repeat: int) -> "TaskSampler":
        sampler = cls.__new__(cls)
        sampler._recipe = (kind, args, kwargs)
        sampler._init(_SOURCES[kind](args, kwargs), batch, repeat)
        return sampler

    @classmethod
    def frontier(cls, repos: Sequence[Any], *, batch: int = 8, repeat: int = 1, **options: Any) -> "TaskSampler":
        """A FrontierSynthesizer over `repos` (options: FrontierSynthesizer's keyword arguments;
        it runs on the process's default Sandbox)."""
        return cls._from_recipe("frontier", ([str(r) for r in repos],), options, batch, repeat)

    @classmethod
    def static(cls, tasks: Tasks, *, seed: int = 0, batch: int = 8, repeat: int = 1) -> "TaskSampler":
        """Uniform sampling from a fixed task set."""
        return cls._from_recipe("static", (task_list(tasks),), {"seed": seed}, batch, repeat)

    @classmethod
    def easy_to_hard(cls, tasks: Tasks, iterations: int, *, start_fraction: float = 0.3, seed: int = 0,
                     batch: int = 8, repeat: int = 1) -> "TaskSampler":
        """A fixed task set opened from its easiest fraction to all of it over `iterations`."""
        kwargs = {"start_fraction": start_fraction, "seed": seed}
        return cls._from_recipe("easy_to_hard", (task_list(tasks), iterations), kwargs, batch, repeat)

    # Drawing -----------------------------------------------------------------------------

    def __iter__(self) -> "TaskSampler":
        return self

    def __next__(self) -> Task:
        with self._lock:
            if self._current is None or self._left_of_current == 0:
                if not self._queue:
                    proposed = list(self.source.propose(self.batch))
                    if not proposed:
                        raise StopIteration
                    self._queue.extend(task_of(task) for task in proposed)
                self._current = self._queue.popleft()
                self._left_of_current = self.repeat
            self._left_of_current -= 1
            self._drawn += 1
            return dict(self._current)

    def sample(self, n: int) -> List[Task]:
        """The next n draws (fewer when the source runs out)."""
        out = []
        for _ in range(n):
            try:
                out.append(next(self))
            except StopIteration:
                break
        return out

    # Feedback ----------------------------------------------------------------------------

    def observe(self, results: Any) -> int:
        """Reports finished rollouts: one result or an iterable of them. A result is an outcome
        dict (task_id plus resolved and/or reward), an episode record, or any dict that carries
        the task (`task`, `task_id`, or a task in info/extra_info) and a `reward` (or `score`);
        a prime-rl group is a list of such dicts. Returns how many outcomes were passed on."""
        if isinstance(results, Mapping):
            results = [results]
        outcomes = [outcome_of(result) for result in results]
        with self._lock:
            if outcomes:
                self.source.feedback(outcomes)
            self._observed += len(outcomes)
        return len(outcomes)

    def metrics(self) -> Dict[str, Any]:
        with self._lock:
            metrics = dict(self.source.metrics()) if hasattr(self.source, "metrics") else {}
            metrics.update(sampler_drawn=self._drawn, sampler_observed=self._observed)
            return metrics

    # State -------------------------------------------------------------------------------

    def state_dict(self) -> Dict[str, Any]:
        """The source's state (JSON) and the tasks drawn but not yet handed out."""
        with self._lock:
            return {
                "source": self.source.state() if hasattr(self.source, "state") else None,
                "queue": [dict(t) for t in self._queue],
                "current": dict(self._current) if self._current is not None else None,
                "left_of_current": self._left_of_current,
                "drawn": self._drawn,
                "observed": self._observed,
            }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        with self._lock:
            if state.get("source") is not None and hasattr(self.source, "load_state"):
                self.source.load_state(state["source"])
            self._queue = collections.deque(task_of(t) for t in state.get("queue", []))
            current = state.get("current")
            self._current = task_of(current) if current is not None else None
            self._left_of_current = int(state.get("left_of_current", 0))
            self._drawn = int(state.get("drawn", 0))
            self._observed = int(state.get("observed", 0))

    def __getstate__(self) -> Dict[str, Any]:
        with self._lock:
            state = {"batch": self.batch, "repeat": self.repeat, "recipe": self._recipe,
                     "state": self.state_dict()}
            if self._recipe is None:
                state["source"] = self.source  # must pickle itself
            return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        recipe = state["recipe"]
        if recipe is not None:
            kind, args, kwargs = recipe
            self._recipe = recipe
            self._init(_SOURCES[kind](args, kwargs), state["batch"], state["repeat"])
        else:
            self._recipe = None
            self._init(state["source"], state["batch"], state["repeat"])
        self.load_state_dict(state["state"])

    def __repr__(self) -> str:
        return f"TaskSampler({type(self.source).__name__}, batch={self.batch}, repeat={self.repeat})"


def outcome_of(result: Any) -> Dict[str, Any]:
    """An outcome dict for a task source's feedback from one finished rollout (see observe)."""
    if not isinstance(result, Mapping):
        raise frognano.InvalidArgumentError(
            f"a rollout result must be a dict (an outcome, a record, or a rollout with a reward), "
            f"not {type(result).__name__}"
        )
    outcome = result.get("outcome")
    if isinstance(outcome, Mapping) and "task_id" in outcome:
        return dict(outcome)
    task_id = result.get("task_id")
    if task_id is None:
        try:
            task_id = task_of_row(result)["id"]
        except frognano.TaskError as error:
            raise frognano.InvalidArgumentError(f"a rollout result names no task: {error}") from None
    reward = result.get("reward", result.get("score"))
    resolved = result.get("resolved")
    if reward is None and resolved is None:
        raise frognano.InvalidArgumentError(
            f"the result for task {task_id} has neither `reward` nor `resolved` (keys: {sorted(result)})"
        )
    try:
        reward = float(reward if reward is not None else (1.0 if resolved else 0.0))
    except (TypeError, ValueError):
        raise frognano.InvalidArgumentError(f"the reward for task {task_id} is not a number: {reward!r}") from None
    if resolved is None:
        resolved = reward >= 1.0
    return {"task_id": str(task_id), "resolved": bool(resolved), "reward": reward}
