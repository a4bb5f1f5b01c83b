"""FrogNano as a Gymnasium environment: check it with gymnasium's own checker, then play one
episode that fixes the task's bug with edit tool calls and submits.

    pip install 'frognano[gymnasium]'
    python examples/python/integrations/gymnasium_env.py
"""

from pathlib import Path

from gymnasium.utils.env_checker import check_env

import frognano
from frognano.integrations import fix_actions
from frognano.integrations.gymnasium import FrogNanoEnv

TASKS = Path(__file__).resolve().parents[2] / "tasks" / "sample.jsonl"


def main():
    tasks = frognano.load_tasks(TASKS)
    env = FrogNanoEnv(tasks, max_steps=20)
    check_env(env)
    print("check_env passed")
    obs, info = env.reset(options={"task": tasks[0]["id"]})
    print(obs.splitlines()[0])
    obs, reward, terminated, truncated, info = env.step("test")
    print(f"tests: {info['tests']['passed']} passed, {info['tests']['failed']} failed")
    for action in fix_actions(tasks[0]):  # the reference fix, as edit tool calls
        env.step(action)
    obs, reward, terminated, truncated, info = env.step("submit")
    env.close()
    print(f"resolved {int(reward)}/1 (reward {reward}, terminated {terminated})")


if __name__ == "__main__":
    main()
