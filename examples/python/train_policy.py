"""Train a repair policy with RL from Python: a learner and a curriculum written in Python,
plugged into frognano.GrpoTrainer, on tasks synthesized from a repository; then the trained
policy is evaluated on held-out tasks.

    python examples/python/train_policy.py [REPO_DIR] [--iterations N] [--seed SEED]

REPO_DIR defaults to examples/repos/textkit. The learner acts through a frognano.RepairPolicy
(which reads the code, enumerates candidate repairs and records each choice's sparse features)
and computes the policy gradient itself, in pure Python, from the decisions recorded in the
batch; the curriculum favours tasks whose outcomes are mixed (the ones with something to learn).
The defaults (two iterations of two tasks x four rollouts, four held-out tasks) take a minute or
two on two cores: they show the loop, and are far too small to measure learning reliably.
"""

import argparse
import math
import random
import sys
import time
from pathlib import Path

import frognano


class PythonLearner:
    """A policy and learner: acts through a RepairPolicy, learns by policy gradient with Adam.

    For a decision with candidates' features phi_j (sparse [[index, value], ...]), temperature T
    and the chosen candidate c, the gradient of log p(c) is (phi_c - E_p[phi]) / T; each is
    weighted by the trajectory's advantage and an importance ratio (current / rollout
    probability, capped) and averaged over trajectories. The new weights go back to the
    RepairPolicy with set_weights."""

    def __init__(self, seed=0, learning_rate=0.1, ratio_cap=2.0):
        self.policy = frognano.RepairPolicy(seed=seed)
        self.names = frognano.repair_feature_names()
        n = len(self.names)
        self.weights = [0.0] * n
        self.learning_rate, self.ratio_cap = learning_rate, ratio_cap
        self.m, self.v, self.t = [0.0] * n, [0.0] * n, 0

    def act(self, contexts):
        return self.policy.act(contexts)

    def probabilities(self, features, temperature):
        logits = [sum(self.weights[i] * v for i, v in f) / temperature for f in features]
        top = max(logits)
        exps = [math.exp(l - top) for l in logits]
        total = sum(exps)
        return [e / total for e in exps]

    def learn(self, batch):
        grad = [0.0] * len(self.weights)
        decisions = 0
        for trajectory in batch["trajectories"]:
            for step in trajectory["steps"]:
                decision = step.get("decision")
                if not decision or "features" not in decision:
                    continue  # a scripted step (run the tests, read a file, undo, submit)
                features, chosen = decision["features"], decision["chosen"]
                temperature = decision.get("temperature") or 1.0
                probs = self.probabilities(features, temperature)
                ratio = 1.0
                if step["logprobs"]:
                    now = math.log(max(probs[chosen], 1e-300))
                    ratio = min(math.exp(now - step["logprobs"][0]), self.ratio_cap)
                scale = trajectory["advantage"] * ratio / temperature
                for i, v in features[chosen]:
                    grad[i] += scale * v
                for p, candidate in zip(probs, features):
                    for i, v in candidate:
                        grad[i] -= scale * p * v
                decisions += 1
        n = max(len(batch["trajectories"]), 1)
        grad = [g / n for g in grad]
        norm = math.sqrt(sum(g * g for g in grad))
        if decisions and norm > 0:
            self.adam_step(grad)
            self.policy.set_weights(self.weights)
        return {"decisions": decisions, "grad_norm": norm}

    def adam_step(self, grad, beta1=0.9, beta2=0.999, eps=1e-8):
        self.t += 1
        for i, g in enumerate(grad):
            self.m[i] = beta1 * self.m[i] + (1 - beta1) * g
            self.v[i] = beta2 * self.v[i] + (1 - beta2) * g * g
            m_hat = self.m[i] / (1 - beta1 ** self.t)
            v_hat = self.v[i] / (1 - beta2 ** self.t)
            self.weights[i] += self.learning_rate * m_hat / (math.sqrt(v_hat) + eps)

    # For checkpoints (GrpoTrainer.save_checkpoint / resume).
    def state(self):
        return {"weights": self.weights, "m": self.m, "v": self.v, "t": self.t}

    def load_state(self, state):
        self.weights, self.m, self.v, self.t = state["weights"], state["m"], state["v"], state["t"]
        self.policy.set_weights(self.weights)


class MixedOutcomeCurriculum:
    """A task source over a fixed set that samples tasks by learnability: 4 p (1 - p) of the
    posterior mean success rate p of each task (Beta(1, 1) prior), plus a little exploration,
    so tasks the policy sometimes solves come up most."""

    def __init__(self, tasks, seed=0, exploration=0.1):
        self.tasks = {t["id"]: t for t in tasks}
        self.counts = {t["id"]: [0, 0] for t in tasks}  # [resolved, attempts]
        self.rng = random.Random(seed)
        self.exploration = exploration

    def score(self, task_id):
        solved, attempts = self.counts[task_id]
        return frognano.learnability((1 + solved) / (2 + attempts)) + self.exploration

    def propose(self, n):
        pool = list(self.tasks)
        chosen = []
        while pool and len(chosen) < n:
            pick = self.rng.choices(pool, weights=[self.score(t) for t in pool])[0]
            pool.remove(pick)
            chosen.append(self.tasks[pick])
        return chosen

    def feedback(self, outcomes):
        for outcome in outcomes:
            if outcome["task_id"] in self.counts:
                self.counts[outcome["task_id"]][0] += int(outcome["resolved"])
                self.counts[outcome["task_id"]][1] += 1

    def metrics(self):
        scores = [self.score(t) for t in self.tasks]
        return {"mean_score": sum(scores) / len(scores),
                "attempted": sum(1 for s, n in self.counts.values() if n)}

    def state(self):
        return {"counts": self.counts}

    def load_state(self, state):
        self.counts.update(state["counts"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", nargs="?", type=Path,
                        default=Path(__file__).resolve().parents[1] / "repos" / "textkit")
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--train-tasks", type=int, default=4)
    parser.add_argument("--held-out", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.time()

    sandbox = frognano.Sandbox()
    # Bugs of the kinds the repair policy can undo (flipped comparisons and operands).
    synth = frognano.Synthesizer(args.repo, sandbox=sandbox, seed=args.seed,
                                 operators=["flip_operators", "boundary_condition", "op_swap"])
    tasks = synth.generate(args.train_tasks + args.held_out)
    # A candidate repair can make the code loop forever, and such a test run lasts until the
    # task's timeout: cap it at ten times the clean suite's time (at least 5 s).
    timeout = max(5.0, 10 * synth.intake["suite_seconds"])
    for task in tasks:
        task["limits"]["timeout_s"] = min(task["limits"]["timeout_s"], timeout)
    train, held_out = tasks[:args.train_tasks], tasks[args.train_tasks:]
    print(f"synthesized {len(train)} training and {len(held_out)} held-out tasks "
          f"in {time.time() - started:.0f} s")
    if not train or not held_out:
        print("not enough tasks", file=sys.stderr)
        return 1

    learner = PythonLearner(seed=args.seed)
    curriculum = MixedOutcomeCurriculum(train, seed=args.seed)
    trainer = frognano.GrpoTrainer(sandbox, learner, curriculum, tasks_per_iteration=2, group_size=4)

    def evaluate(weights):
        policy = frognano.RepairPolicy(seed=args.seed, greedy=True)
        policy.set_weights(weights)
        summary, _ = trainer.evaluate(policy, held_out)
        return summary

    before = evaluate(learner.weights)
    print(f"untrained (greedy) on the held-out tasks: resolved {before['resolved']}/{before['episodes']}")
    for _ in range(args.iterations):
        m = trainer.iterate()
        extra = m["extra"]
        learned = extra["learner"]
        print(f"iteration {m['iteration']}: resolved {m['resolved_rate']:.0%} of {m['rollouts']} rollouts "
              f"in {extra['wall_s']:.0f} s, {extra['groups'] - extra['zero_variance_groups']}/{extra['groups']} "
              f"groups with signal, {learned.get('decisions', 0)} decisions learned from, "
              f"curriculum {extra['synthesizer']}")
    after = evaluate(learner.weights)

    moved = sorted(zip(learner.names, learner.weights), key=lambda nw: -abs(nw[1]))[:3]
    print("largest weights:", ", ".join(f"{name} {w:+.2f}" for name, w in moved))
    print(f"held-out resolved: {before['resolved']}/{before['episodes']} before, "
          f"{after['resolved']}/{after['episodes']} after {trainer.iteration} iterations "
          f"({sum(h['rollouts'] for h in trainer.history)} rollouts, {time.time() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
