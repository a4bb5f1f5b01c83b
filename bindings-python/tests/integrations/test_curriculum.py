"""TaskSampler, the curriculum as a service: a thread-safe iterator of tasks over any source,
with observe(results) feedback that moves the frontier, and a state that pickles."""

import pickle
import threading
from pathlib import Path

import pytest

import frognano
from frognano.integrations import TaskSampler, outcome_of

TEXTKIT = Path(__file__).resolve().parents[3] / "examples" / "repos" / "textkit"


def test_static_sampler_is_thread_safe_and_repeats_groups(tasks):
    sampler = TaskSampler(tasks, batch=3, repeat=2, seed=5)
    ids = [next(sampler)["id"] for _ in range(8)]
    assert ids[0::2] == ids[1::2]  # groups of two draws share a task
    drawn = []

    def draw():
        for _ in range(50):
            drawn.append(next(sampler)["id"])

    threads = [threading.Thread(target=draw) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    known = {t["id"] for t in tasks}
    assert len(drawn) == 200 and set(drawn) <= known
    assert sampler.metrics()["sampler_drawn"] == 208


def test_state_pickles_and_continues_the_same_sequence(tasks):
    sampler = TaskSampler.static(tasks, seed=9, batch=4)
    sampler.sample(3)
    clone = pickle.loads(pickle.dumps(sampler))
    assert [t["id"] for t in clone.sample(6)] == [t["id"] for t in sampler.sample(6)]
    state = sampler.state_dict()
    fresh = TaskSampler.static(tasks, seed=9, batch=4)
    fresh.load_state_dict(state)
    assert [t["id"] for t in fresh.sample(5)] == [t["id"] for t in sampler.sample(5)]


def test_easy_to_hard_and_custom_sources(tasks):
    opening = TaskSampler.easy_to_hard(tasks, iterations=4, start_fraction=0.25, batch=4)
    assert len(opening.sample(4)) == 4

    class Source:
        def __init__(self):
            self.seen = []

        def propose(self, n):
            return tasks[:n]

        def feedback(self, outcomes):
            self.seen.extend(outcomes)

    source = Source()
    sampler = TaskSampler(source, batch=2)
    first = next(sampler)
    assert sampler.observe({"task": first, "score": 1}) == 1
    assert source.seen == [{"task_id": first["id"], "resolved": True, "reward": 1.0}]
    pickle.loads(pickle.dumps(TaskSampler(tasks)))  # a task list pickles by recipe


def test_outcomes_from_the_shapes_trainers_report(tasks):
    task = tasks[0]
    assert outcome_of({"task_id": "a", "resolved": True}) == {"task_id": "a", "resolved": True, "reward": 1.0}
    assert outcome_of({"info": {"task": frognano.integrations.task_json(task)}, "reward": 0.0})["task_id"] == task["id"]
    assert outcome_of({"extra_info": {"task": task}, "reward": 0.5}) == {
        "task_id": task["id"], "resolved": False, "reward": 0.5}
    record = {"outcome": {"task_id": "b", "resolved": False, "reward": 0.0, "steps": 3}}
    assert outcome_of(record)["steps"] == 3
    for bad in [42, {"reward": 1.0}, {"task_id": "a"}, {"task_id": "a", "reward": "high"}]:
        with pytest.raises(frognano.InvalidArgumentError):
            outcome_of(bad)
    with pytest.raises(frognano.InvalidArgumentError):
        TaskSampler(tasks, repeat=0)
    with pytest.raises(frognano.TaskError):
        TaskSampler([{"repo": "x"}])


def test_the_frontier_moves_with_what_it_observes_and_survives_pickling(sandbox):
    sampler = TaskSampler.frontier([TEXTKIT], seed=0, operators=["op_swap", "flip_operators"], bug_counts=[1],
                                   buffer=1, buffered_families=2, batch=1, repeat=2)
    assert all(f["groups"] == 0 for f in sampler.source.families)
    task = next(sampler)
    assert next(sampler)["id"] == task["id"]
    operator = task["metadata"]["difficulty"]["operators"][0]
    # A prime-rl group: the rollouts of one task with their rewards.
    sampler.observe([{"task": task, "reward": 1.0}, {"task": task, "reward": 1.0}])
    (family,) = [f for f in sampler.source.families if f["groups"] == 1]
    assert family["key"]["operator"] == operator
    assert family["alpha"] > family["beta"]  # two successes moved its posterior up
    clone = pickle.loads(pickle.dumps(sampler))
    assert [(f["label"], f["alpha"], f["beta"], f["groups"]) for f in clone.source.families] == [
        (f["label"], f["alpha"], f["beta"], f["groups"]) for f in sampler.source.families]
    assert clone.metrics()["sampler_observed"] == 2
