"""FrogNano as a GEM environment, built by GEM from its env id.

Importing frognano.integrations.gem registers `frognano:RepoRepair-v0`; a trainer on GEM (ROLL,
rLLM) then builds it with `gem.make` / `gem.make_vec` from the id in its config. This script
makes one env over the bundled sample tasks, plays one task's reference fix, submits and prints
the graded outcome, then runs a two-env `make_vec` with GEM's `concat` observation wrapper for
a step.
"""

import pathlib

import frognano
import gem
from frognano.integrations import fix_actions
from frognano.integrations import gem as frognano_gem
from gem.wrappers.wrapper_factory import get_wrapper_fns

ROOT = pathlib.Path(__file__).resolve().parents[3]
SAMPLE_TASKS = ROOT / "examples" / "tasks" / "sample.jsonl"


def main() -> None:
    task = frognano.load_tasks(SAMPLE_TASKS)[0]
    env = gem.make(frognano_gem.ENV_ID, tasks=[task], max_steps=20, seed=0)
    env.reset()
    for action in fix_actions(task):  # what a perfect agent would send
        env.step(action)
    _, reward, terminated, _, info = env.step("submit")
    env.close()
    vec = gem.make_vec([frognano_gem.ENV_ID] * 2, wrappers=get_wrapper_fns("concat"), tasks=str(SAMPLE_TASKS),
                       max_steps=5, seed=0)
    observations, _ = vec.reset(seed=0)
    _, rewards, _, _, _ = vec.step(["test", "ls"])
    for single in vec.envs:
        single.unwrapped.close()
    print(f"gem: {frognano_gem.ENV_ID} resolved {int(info['outcome']['resolved'])}/1 with the reference fix, "
          f"reward {reward:.1f}, terminated {terminated}; make_vec: {len(observations)} envs stepped, "
          f"rewards {list(rewards)}")


if __name__ == "__main__":
    main()
