"""An agent loop over the bundled sample tasks with RepoEnv (Gymnasium-style), then the
built-in oracle and no-op baselines through frognano.evaluate.

Run: python examples/python/agent_loop.py   (after `pip install frognano` or a built wheel)
"""

from pathlib import Path

import frognano

TASKS = Path(__file__).resolve().parents[1] / "tasks" / "sample.jsonl"


def main():
    tasks = frognano.load_tasks(TASKS)
    sandbox = frognano.Sandbox()
    env = frognano.RepoEnv(sandbox, max_steps=8)

    # A hand-written agent: run the tests, look at the first failing test's file, give up.
    obs, info = env.reset(tasks[0])
    print(obs.splitlines()[3])
    obs, reward, terminated, truncated, info = env.step("test")
    failing = info["tests"]["failing"]
    print("failing:", failing)
    obs, *_ = env.step({"name": "view", "arguments": {"path": failing[0].split("::")[0], "end_line": 5}})
    print(obs)
    obs, reward, terminated, truncated, info = env.step("submit")
    print("reward", reward, "outcome", env.outcome)
    env.close()

    for policy in ("oracle", "noop"):
        summary, _ = frognano.evaluate(tasks, policy, sandbox=sandbox)
        print(f"{policy}: resolved {summary['resolved']}/{summary['episodes']}, "
              f"recovery {summary['recovery_rate']:.0%}, {summary['steps_per_s']:.1f} env steps/s")
        assert summary["resolved_rate"] == (1.0 if policy == "oracle" else 0.0)


if __name__ == "__main__":
    main()
