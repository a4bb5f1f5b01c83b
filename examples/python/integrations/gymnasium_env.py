"""FrogNano as a Gymnasium environment: check it with gymnasium's own checker, then play one
episode that fixes the task's bug with edit tool calls and submits.

    pip install 'frognano[gymnasium]'
    python examples/python/integrations/gymnasium_env.py
"""

from pathlib import Path

from gymnasium.utils.env_checker import check_env

import frognano
from frognano.integrations.gymnasium import FrogNanoEnv

TASKS = Path(__file__).resolve().parents[2] / "tasks" / "sample.jsonl"


def true_fix(task):
    """Edit calls undoing the task's bug_patch, one per hunk (what a perfect agent would do)."""
    actions, path, before, after = [], None, [], []
    for line in task["bug_patch"].splitlines(keepends=True) + ["@@"]:
        if line.startswith(("@@", "+++ ")):
            if path and (before or after):
                actions.append({"name": "edit", "arguments": {"path": path, "search": "".join(after),
                                                             "replace": "".join(before)}})
            before, after = [], []
            if line.startswith("+++ "):
                path = line[4:].strip().removeprefix("b/")
        elif line.startswith(("---", "diff ", "index ", "\\")):
            continue
        elif line[:1] in "+- ":
            (after if line[0] == "+" else before).append(line[1:])
            if line[0] == " ":
                after.append(line[1:])
    return actions


def main():
    tasks = frognano.load_tasks(TASKS)
    env = FrogNanoEnv(tasks, max_steps=20)
    check_env(env)
    print("check_env passed")
    obs, info = env.reset(options={"task": tasks[0]["id"]})
    print(obs.splitlines()[0])
    obs, reward, terminated, truncated, info = env.step("test")
    print(f"tests: {info['tests']['passed']} passed, {info['tests']['failed']} failed")
    for action in true_fix(tasks[0]):
        env.step(action)
    obs, reward, terminated, truncated, info = env.step("submit")
    env.close()
    print(f"resolved {int(reward)}/1 (reward {reward}, terminated {terminated})")


if __name__ == "__main__":
    main()
