"""Training through the installed package: group advantages, the learnable RepairPolicy,
GrpoTrainer with Rust and Python components, the task sources, checkpoints and errors.

Real sandbox, real synthesis, kept small: four tasks from textkit, groups of two."""

import _thread
import json
import math
import threading
import time
from pathlib import Path

import pytest

import frognano

TEXTKIT = Path(__file__).resolve().parents[2] / "examples" / "repos" / "textkit"
FEATURES = frognano.repair_feature_names()


@pytest.fixture(scope="module")
def tasks(sandbox):
    return frognano.Synthesizer(TEXTKIT, sandbox=sandbox, seed=7).generate(4)


# Advantages and learnability ------------------------------------------------------------------


def test_group_advantages_match_their_definitions():
    rewards = [1.0, 0.0, 0.0, 1.0]
    std = math.sqrt(sum((r - 0.5) ** 2 for r in rewards) / 3)  # the sample standard deviation
    a = 0.5 / (std + 1e-6)
    grpo = frognano.group_advantages(rewards)
    assert grpo == pytest.approx([a, -a, -a, a])
    assert frognano.group_advantages(rewards, "grpo") == grpo
    assert frognano.group_advantages(rewards, "dr_grpo") == pytest.approx([0.5, -0.5, -0.5, 0.5])
    # RLOO: each reward against the mean of the others.
    assert frognano.group_advantages([1.0, 0.0, 0.0], "rloo") == pytest.approx([1.0, -0.5, -0.5])
    assert frognano.group_advantages([1.0, 0.0, 0.5], "rloo") == pytest.approx([0.75, -0.75, 0.0])
    assert frognano.group_advantages([2.0, 0.0], "Dr-GRPO") == pytest.approx([1.0, -1.0])
    for estimator in ("grpo", "dr_grpo", "rloo"):
        assert frognano.group_advantages([1.0, 1.0, 1.0], estimator) == [0.0, 0.0, 0.0]
        assert frognano.group_advantages([1.0], estimator) == [0.0]
        assert frognano.group_advantages([], estimator) == []
    with pytest.raises(frognano.ConfigError, match="unknown advantage estimator"):
        frognano.group_advantages([1.0, 0.0], "ppo")


def test_learnability_peaks_at_the_target():
    assert frognano.learnability(0.5) == pytest.approx(1.0)
    assert frognano.learnability(0.25) == pytest.approx(0.75)
    assert frognano.learnability(0.0) == 0.0 and frognano.learnability(1.0) == 0.0
    assert frognano.learnability(0.3, target=0.3) == pytest.approx(1.0)
    assert frognano.learnability(0.5, target=0.3) < 1.0
    with pytest.raises(frognano.InvalidArgumentError):
        frognano.learnability(0.5, target=1.0)


# RepairPolicy ---------------------------------------------------------------------------------


def softmax_probability(weights, candidates, chosen, temperature=1.0):
    logits = [sum(weights[FEATURES[i]] * v for i, v in f) / temperature for f in candidates]
    top = max(logits)
    exps = [math.exp(l - top) for l in logits]
    return exps[chosen] / sum(exps)


def test_repair_policy_construction_and_properties():
    policy = frognano.RepairPolicy(3, temperature=0.5, learning_rate=0.2, max_candidates=10)
    config = policy.config
    assert (config["seed"], config["temperature"], config["learning_rate"], config["max_candidates"]) == (3, 0.5, 0.2, 10)
    assert config["greedy"] is False and config["max_attempts"] == 8
    policy.set_greedy(True)
    assert policy.config["greedy"] is True
    assert list(policy.weights) == FEATURES and set(policy.weights.values()) == {0.0}
    assert policy.updates == 0 and "RepairPolicy(seed=3" in repr(policy)
    assert "op:op_swap" in FEATURES and "on_traceback_line" in FEATURES
    with pytest.raises(frognano.InvalidArgumentError, match="temperature"):
        frognano.RepairPolicy(temperature=0.0)
    with pytest.raises(ValueError, match="max_attempts"):
        frognano.RepairPolicy(max_attempts=0)
    with pytest.raises(TypeError):
        frognano.RepairPolicy(no_such_option=1)


def test_repair_policy_acts_on_contexts(sandbox, tasks):
    policy = frognano.RepairPolicy(seed=0)
    env = frognano.RepoEnv(sandbox)
    obs, info = env.reset(tasks[0])
    (first,) = policy.act([{"task_id": info["task_id"], "initial": {"text": obs}, "history": []}])
    assert first["action"]["name"] == "run_tests", first
    assert first["logprobs"] == [] and first["decision"] is None
    env.close()
    # As a drop-in Python policy: its choices carry their decisions into the records.
    summary, records = frognano.evaluate(tasks[:1], policy, sandbox=sandbox, max_steps=10)
    assert summary["episodes"] == 1
    decisions = [s["decision"] for s in records[0]["steps"] if s.get("decision")]
    assert decisions, records[0]["steps"]
    decision = decisions[0]
    assert {"chosen", "operator", "temperature", "features"} <= decision.keys()
    assert 0 <= decision["chosen"] < len(decision["features"])
    for candidate in decision["features"]:
        assert all(0 <= i < len(FEATURES) and isinstance(v, float) for i, v in candidate)
    with pytest.raises(frognano.InvalidArgumentError, match="policy contexts"):
        policy.act([{"task_id": "x"}])


def test_learning_raises_the_rewarded_choice_and_state_round_trips():
    policy = frognano.RepairPolicy(seed=0)
    good = [[0, 1.0], [FEATURES.index("on_traceback_line"), 1.0]]
    bad = [[1, 1.0]]

    def step(chosen):
        return {
            "action": {"name": "edit", "arguments": {"path": "a.py", "search": "<", "replace": ">"}},
            "logprobs": [math.log(0.5)],
            "decision": {"chosen": chosen, "temperature": 1.0, "features": [good, bad]},
        }

    batch = {
        "estimator": "grpo",
        "group_size": 2,
        "trajectories": [
            {"task_id": "t", "reward": 1.0, "advantage": 1.0, "steps": [{"action": "test"}, step(0)]},
            {"task_id": "t", "reward": 0.0, "advantage": -1.0, "steps": [step(1)]},
        ],
    }
    before = softmax_probability(policy.weights, [good, bad], 0)
    for _ in range(5):
        stats = policy.learn(batch)
        assert stats["decisions"] == 2 and stats["grad_norm"] > 0
    after = softmax_probability(policy.weights, [good, bad], 0)
    assert before == pytest.approx(0.5) and after > before + 0.2, (before, after)
    assert policy.updates == 5

    state = policy.state()
    assert state["kind"] == "repair" and state["features"] == FEATURES
    json.dumps(state)  # JSON-ready
    restored = frognano.RepairPolicy(seed=0)
    restored.load_state(state)
    assert restored.weights == policy.weights and restored.updates == 5
    with pytest.raises(frognano.InvalidArgumentError):
        restored.load_state({"weights": "x"})

    restored.set_weights({"op:op_swap": 1.5})
    assert restored.weights["op:op_swap"] == 1.5
    assert restored.weights[FEATURES[0]] == policy.weights[FEATURES[0]]  # the others stay
    restored.set_weights([0.25] * len(FEATURES))
    assert set(restored.weights.values()) == {0.25}
    with pytest.raises(frognano.InvalidArgumentError, match="unknown feature"):
        restored.set_weights({"no_such_feature": 1.0})
    with pytest.raises(frognano.InvalidArgumentError, match="weights given"):
        restored.set_weights([1.0, 2.0])
    with pytest.raises(frognano.InvalidArgumentError, match="finite"):
        restored.set_weights({"op:op_swap": float("nan")})
    with pytest.raises(frognano.InvalidArgumentError, match="training batch"):
        policy.learn({"trajectories": [{"steps": [{"action": 3}]}]})


# Task sources ---------------------------------------------------------------------------------


def test_static_and_easy_to_hard_curricula(tasks):
    curriculum = frognano.StaticCurriculum(tasks, seed=1)
    assert len(curriculum) == 4 and [t["id"] for t in curriculum.tasks] == [t["id"] for t in tasks]
    first = curriculum.propose(3)
    assert len({t["id"] for t in first}) == 3
    assert len(curriculum.propose(6)) == 6  # more than the set: repeats
    curriculum.feedback([{"task_id": first[0]["id"], "resolved": True}])
    assert curriculum.metrics() == {} and curriculum.state() == {"kind": "static", "calls": 2}
    again = frognano.StaticCurriculum(tasks, seed=1)
    assert [t["id"] for t in again.propose(3)] == [t["id"] for t in first]
    again.load_state({"calls": 0})
    assert [t["id"] for t in again.propose(3)] == [t["id"] for t in first]

    schedule = frognano.EasyToHard(tasks, iterations=3, start_fraction=0.25, seed=0)
    assert schedule.open_fraction(0) == pytest.approx(0.25) and schedule.open_fraction(2) == pytest.approx(1.0)
    assert len(schedule.propose(2)) == 2
    assert schedule.metrics()["open_fraction"] == pytest.approx(0.25)
    assert schedule.state()["calls"] == 1
    with pytest.raises(frognano.InvalidArgumentError):
        frognano.StaticCurriculum([])
    with pytest.raises(frognano.ConfigError, match="start_fraction"):
        frognano.EasyToHard(tasks, 3, start_fraction=0.0)


def test_frontier_synthesizer_proposes_and_learns_from_feedback(sandbox, tasks):
    excluded = tasks[0]["id"]
    frontier = frognano.FrontierSynthesizer(
        sandbox, [TEXTKIT], seed=0, operators=["op_swap", "flip_operators"], bug_counts=[1],
        buffer=1, buffered_families=2, exclude=[excluded],
    )
    families = frontier.families
    assert sorted(f["label"] for f in families) == ["flip_operators/1/2", "op_swap/1/2"]
    assert all(f["alpha"] == 1.0 and f["beta"] == 1.0 and f["groups"] == 0 for f in families)
    proposed = frontier.propose(2)
    assert 1 <= len(proposed) <= 2
    for task in proposed:
        assert task["id"].startswith("textkit__") and task["id"] != excluded
        assert task["metadata"]["difficulty"]["operators"][0] in {"op_swap", "flip_operators"}
    task = proposed[0]
    frontier.feedback([{"task_id": task["id"], "resolved": True}, {"task_id": task["id"], "resolved": False}])
    (family,) = [f for f in frontier.families if f["groups"] == 1]
    assert family["key"]["operator"] == task["metadata"]["difficulty"]["operators"][0]
    assert family["alpha"] > 1.0 and family["beta"] > 1.0 and family["mean"] == pytest.approx(0.5, abs=0.2)
    metrics = frontier.metrics()
    assert metrics["families"] == 2 and metrics["generated_total"] >= len(proposed)
    assert sum(metrics["chosen_families"].values()) == len(proposed)
    state = frontier.state()
    assert state["kind"] == "frontier" and json.loads(json.dumps(state)) == state
    before = frontier.families
    frontier.load_state(state)
    assert [(f["alpha"], f["beta"], f["groups"]) for f in frontier.families] == [
        (f["alpha"], f["beta"], f["groups"]) for f in before
    ]
    with pytest.raises(frognano.ConfigError, match="target_success"):
        frognano.FrontierSynthesizer(sandbox, [TEXTKIT], target_success=1.5)
    with pytest.raises(frognano.ConfigError, match="at least one repository"):
        frognano.FrontierSynthesizer(sandbox, [])


# GrpoTrainer ----------------------------------------------------------------------------------


def test_trainer_iterates_checkpoints_and_resumes(sandbox, tasks, tmp_path):
    policy = frognano.RepairPolicy(seed=0)
    trainer = frognano.GrpoTrainer(
        sandbox, policy, frognano.StaticCurriculum(tasks, seed=0), tasks_per_iteration=2, group_size=2,
        max_steps=12, metrics_file=tmp_path / "metrics.jsonl",
    )
    assert trainer.iteration == 0 and trainer.history == [] and trainer.last_batch is None
    assert trainer.config["group_size"] == 2 and trainer.config["estimator"] == "grpo"
    assert trainer.policy is policy

    metrics = trainer.iterate()
    assert metrics["iteration"] == 0 and metrics["rollouts"] == 4
    assert 0.0 <= metrics["resolved_rate"] <= 1.0
    extra = metrics["extra"]
    assert extra["groups"] == 2 and 0 <= extra["zero_variance_groups"] <= 2
    assert extra["rollout_s"] > 0 and extra["env_steps_per_s"] > 0 and extra["failed_resets"] == 0
    assert "learner" in extra and "synthesizer" in extra
    assert trainer.iteration == 1 and trainer.history == [metrics]
    assert json.loads((tmp_path / "metrics.jsonl").read_text()) == json.loads(json.dumps(metrics))
    batch = trainer.last_batch
    assert batch["group_size"] == 2 and batch["estimator"] == "grpo"
    kept = 2 - extra["zero_variance_groups"]
    assert len(batch["trajectories"]) == 2 * kept
    if kept:
        assert extra["learner"]["decisions"] == extra["trainable_steps"] > 0
        assert policy.updates == 1  # trained in place

    checkpoint = tmp_path / "checkpoint.json"
    trainer.save_checkpoint(checkpoint)
    saved = json.loads(checkpoint.read_text())
    assert saved["iteration"] == 1 and saved["policy"]["weights"] == list(policy.weights.values())

    fresh = frognano.RepairPolicy(seed=0)
    resumed = frognano.GrpoTrainer(sandbox, fresh, tasks, tasks_per_iteration=2, group_size=2)
    resumed.resume(checkpoint)
    assert resumed.iteration == 1 and resumed.history == trainer.history
    assert fresh.weights == policy.weights and fresh.updates == policy.updates

    summary, records = resumed.evaluate("oracle", tasks[:1])
    assert summary["episodes"] == 1 and summary["resolved_rate"] == 1.0 and len(records) == 1
    with pytest.raises(frognano.TrainingError, match="checkpoint"):
        resumed.resume(tmp_path / "missing.json")


class DelegatingLearner:
    """A Python policy and learner: acts through a RepairPolicy, records the batches."""

    def __init__(self):
        self.policy = frognano.RepairPolicy(seed=1)
        self.batches = []
        self.loaded = None

    def act(self, contexts):
        return self.policy.act(contexts)

    def learn(self, batch):
        self.batches.append(batch)
        return {"seen": len(batch["trajectories"])}

    def state(self):
        return {"batches": len(self.batches)}

    def load_state(self, state):
        self.loaded = state


class ListSource:
    """A Python task source: cycles through its tasks, records the outcomes."""

    def __init__(self, tasks):
        self.tasks = tasks
        self.calls = 0
        self.outcomes = []

    def propose(self, n):
        self.calls += 1
        return self.tasks[:n]

    def feedback(self, outcomes):
        self.outcomes.extend(outcomes)

    def metrics(self):
        return {"calls": self.calls}


def test_python_learner_and_synthesizer_plug_in(sandbox, tasks, tmp_path):
    learner, source = DelegatingLearner(), ListSource(tasks)
    trainer = frognano.GrpoTrainer(
        sandbox, learner, source, tasks_per_iteration=2, group_size=2, drop_zero_variance=False,
        estimator="dr_grpo", max_steps=8,
    )
    metrics = trainer.iterate()
    assert metrics["rollouts"] == 4 and metrics["extra"]["synthesizer"] == {"calls": 1}
    assert metrics["extra"]["learner"] == {"seen": 4}
    (batch,) = learner.batches
    assert batch["estimator"] == "dr_grpo" and batch["group_size"] == 2
    assert [t["task_id"] for t in batch["trajectories"]] == [tasks[0]["id"]] * 2 + [tasks[1]["id"]] * 2
    for group in (batch["trajectories"][:2], batch["trajectories"][2:]):
        rewards = [t["reward"] for t in group]
        mean = sum(rewards) / 2
        assert [t["advantage"] for t in group] == pytest.approx([r - mean for r in rewards])
        assert all(t["steps"] and "action" in t["steps"][0] for t in group)
    assert len(source.outcomes) == 4
    assert {o["task_id"] for o in source.outcomes} == {tasks[0]["id"], tasks[1]["id"]}
    assert all({"resolved", "reward", "steps"} <= o.keys() for o in source.outcomes)

    # Checkpoints go through the optional state()/load_state().
    checkpoint = tmp_path / "python.json"
    trainer.save_checkpoint(checkpoint)
    assert json.loads(checkpoint.read_text())["policy"] == {"batches": 1}
    trainer.resume(checkpoint)
    assert learner.loaded == {"batches": 1} and trainer.iteration == 1


class Boom(Exception):
    pass


def test_errors(sandbox, tasks, tmp_path):
    policy = frognano.RepairPolicy()
    with pytest.raises(frognano.ConfigError, match="unknown advantage estimator"):
        frognano.GrpoTrainer(sandbox, policy, tasks, estimator="ppo")
    with pytest.raises(frognano.ConfigError, match="group_size"):
        frognano.GrpoTrainer(sandbox, policy, tasks, group_size=1)
    with pytest.raises(frognano.InvalidArgumentError, match="learn"):
        frognano.GrpoTrainer(sandbox, object(), tasks)
    with pytest.raises(frognano.InvalidArgumentError, match="propose"):
        frognano.GrpoTrainer(sandbox, policy, 42)

    class RaisingPolicy(DelegatingLearner):
        def act(self, contexts):
            raise Boom("no idea what to do")

    trainer = frognano.GrpoTrainer(sandbox, RaisingPolicy(), tasks, tasks_per_iteration=1, group_size=2)
    with pytest.raises(Boom, match="no idea what to do"):
        trainer.iterate()
    assert trainer.iteration == 0 and trainer.history == []

    class RaisingSource(ListSource):
        def propose(self, n):
            raise KeyError("no tasks here")

    trainer = frognano.GrpoTrainer(sandbox, policy, RaisingSource(tasks), tasks_per_iteration=1, group_size=2)
    with pytest.raises(KeyError, match="no tasks here"):
        trainer.iterate()

    class EmptySource(ListSource):
        def propose(self, n):
            return []

    trainer = frognano.GrpoTrainer(sandbox, policy, EmptySource(tasks), tasks_per_iteration=1, group_size=2)
    with pytest.raises(frognano.TrainingError, match="no tasks"):
        trainer.iterate()

    # A policy that reaches back into the trainer running it gets an error, not a deadlock.
    class Reentrant(DelegatingLearner):
        def act(self, contexts):
            return [trainer.iteration for _ in contexts]

    trainer = frognano.GrpoTrainer(sandbox, Reentrant(), tasks, tasks_per_iteration=1, group_size=2)
    with pytest.raises(RuntimeError, match="busy"):
        trainer.iterate()
    assert trainer.iteration == 0  # usable again

    with pytest.raises(frognano.ConfigError, match="unknown field"):
        frognano.train({"no_such_field": 1})
    with pytest.raises(frognano.ConfigError, match="iterations"):
        frognano.train({"iterations": 0, "repos": [str(TEXTKIT)]})


def test_ctrl_c_stops_an_iteration_at_the_next_step(sandbox, tasks):
    class Slow(DelegatingLearner):
        def act(self, contexts):
            time.sleep(0.2)
            return super().act(contexts)

    trainer = frognano.GrpoTrainer(sandbox, Slow(), tasks, tasks_per_iteration=1, group_size=2)
    timer = threading.Timer(1.0, _thread.interrupt_main)
    started = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        trainer.iterate()
    assert time.monotonic() - started < 10
    assert trainer.iteration == 0 and trainer.history == []


def test_train_without_repositories_uses_the_bundled_ones(tmp_path, monkeypatch):
    # Not under the current directory, the bundled repositories are found in the source tree
    # the package was built from (as `frognano train` finds them), so only the mistake stops
    # this job before it starts.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(frognano.ConfigError, match="iterations"):
        frognano.train({"iterations": 0})


def test_train_runs_the_whole_job(sandbox, tmp_path):
    events = []
    config = {
        "repos": [str(TEXTKIT)],
        "curriculum": "static",
        "iterations": 1,
        "held_out": 2,
        "static_tasks": 2,
        "evaluate_initial": False,
        "operators": ["flip_operators", "boundary_condition", "op_swap"],
        "max_bugs": 1,
        "trainer": {"tasks_per_iteration": 1, "group_size": 2, "env": {"max_steps": 12}},
    }
    report = frognano.train(config, tmp_path / "out", sandbox=sandbox,
                            progress=lambda event, data: events.append((event, data)))
    assert report["curriculum"] == "static" and report["held_out_tasks"] == 2
    assert len(report["history"]) == 1 and report["rollouts"] == 2
    assert report["initial"] is None and report["trained"]["episodes"] == 2
    assert report["policy"]["kind"] == "repair"
    for name in ("metrics.jsonl", "checkpoint.json", "held_out.jsonl", "eval.jsonl", "training_tasks.jsonl"):
        assert (tmp_path / "out" / name).is_file(), name
    stages = [data["name"] for event, data in events if event == "stage"]
    assert "train" in stages and any("held-out" in s for s in stages)
    assert [data["iteration"] for event, data in events if event == "iteration"] == [0]

    bad = tmp_path / "bad.toml"
    bad.write_text("iteration = 3\n")
    with pytest.raises(frognano.ConfigError, match="unknown field"):
        frognano.train(bad)
