"""frognano.integrations.gem against the real gem-llm (0.1.0): the env registered under
frognano:RepoRepair-v0 and built by gem.make and gem.make_vec (with GEM's own observation
wrapper and its same-step autoreset), an episode resolved by the reference fix with reward
1.0, truncation by the step budget, seeded task draws that leave the global random state
alone, the curriculum drawing tasks and hearing outcomes, registration under other ids,
spawn, clear errors, and the example script."""

import json
import random

import pytest

from integration_support import RecordingSource, TASKS, framework, run_example

gem = framework("gem")

import frognano  # noqa: E402
from frognano.integrations import TaskSampler, fix_actions  # noqa: E402
from frognano.integrations import gem as fg  # noqa: E402
from gem.wrappers.wrapper_factory import get_wrapper_fns  # noqa: E402


def test_gem_make_builds_the_env_and_the_reference_fix_resolves_the_task(tasks):
    task = tasks[0]
    env = gem.make(fg.ENV_ID, tasks=[task], max_steps=10, seed=0)
    assert isinstance(env, fg.FrogNanoEnv) and isinstance(env, gem.Env) and env.env_id == fg.ENV_ID
    observation, info = env.reset()
    assert task["problem_statement"].splitlines()[0] in observation and info["task_id"] == task["id"]
    observation, reward, terminated, truncated, info = env.step("test")
    assert info["tool"] == "run_tests" and reward == 0.0 and not (terminated or truncated) and "failed" in observation
    actions = fix_actions(task)
    for i, action in enumerate(actions):  # as a dict, then as a JSON tool call in text
        step = env.step(action if i % 2 == 0 else json.dumps(action))
        assert step[4]["error"] is False and not (step[2] or step[3]), step[0]
    observation, reward, terminated, truncated, info = env.step("submit")
    assert terminated and not truncated and reward == 1.0
    assert info["outcome"]["resolved"] is True and info["outcome"]["task_id"] == task["id"]
    assert info["step"] == len(actions) + 2
    env.close()


def test_the_step_budget_truncates_and_grades_the_episode(tasks):
    env = gem.make(fg.ENV_ID, tasks=tasks[:1], max_steps=2, seed=0)
    env.reset()
    first = env.step("I am not sure what to do")  # malformed: an observation, not an error
    assert first[4]["error"] is True and first[4]["tool"] is None and not (first[2] or first[3])
    observation, reward, terminated, truncated, info = env.step("ls")
    assert truncated and not terminated and reward == 0.0
    assert info["outcome"]["resolved"] is False and info["outcome"]["truncated"] is True
    env.close()


def test_make_vec_with_gems_wrapper_and_autoreset(tasks):
    vec = gem.make_vec([fg.ENV_ID] * 2, wrappers=get_wrapper_fns("concat"), tasks=tasks[:4], max_steps=2, seed=7)
    observations, infos = vec.reset(seed=7)
    assert len(observations) == 2 and all(o.startswith("Fix the bug") for o in observations)
    first_tasks = [info["task_id"] for info in infos]
    vec.step(["ls", "ls"])
    observations, rewards, terminated, truncated, infos = vec.step(["ls", "test"])
    # Both episodes ran out of steps: graded, then reset in the same step (GEM's autoreset), so
    # the observations are new episodes' first ones (concatenated by the wrapper from here on).
    assert list(truncated) == [True, True] and list(rewards) == [0.0, 0.0]
    assert all(o.startswith("Fix the bug") for o in observations)
    assert all(info["step"] == 0 and "outcome" not in info for info in infos)
    # The same seeds draw the same tasks again.
    again = gem.make_vec([fg.ENV_ID] * 2, tasks=tasks[:4], max_steps=2, seed=7)
    assert [info["task_id"] for info in again.reset(seed=7)[1]] == first_tasks
    for env in vec.envs + again.envs:
        env.unwrapped.close()


def test_seeded_draws_leave_the_global_random_state_alone(tasks):
    state = random.getstate()
    draws = []
    for _ in range(2):
        env = fg.FrogNanoEnv(tasks, seed=3)
        draws.append([env.reset()[1]["task_id"] for _ in range(4)])
        assert env.reset(seed=3)[1]["task_id"] == draws[-1][0]
        env.close()
    assert draws[0] == draws[1] and len(set(draws[0])) > 1
    assert random.getstate() == state


def test_the_curriculum_draws_tasks_and_hears_the_graded_episodes(tasks):
    source = RecordingSource(tasks[2:3])
    sampler = TaskSampler(source)
    env = gem.make(fg.ENV_ID, sampler=sampler, max_steps=3)
    assert env.reset()[1]["task_id"] == tasks[2]["id"]
    observation, reward, terminated, truncated, info = env.step("submit")
    assert terminated and source.outcomes == [{"task_id": tasks[2]["id"], "resolved": False, "reward": 0.0}]
    with pytest.raises(frognano.EpisodeError, match="reset"):  # after the end, as in Gymnasium
        env.step("submit")
    assert len(source.outcomes) == 1 and sampler.metrics()["sampler_observed"] == 1
    env.close()


def test_register_spawn_and_random_actions(tasks):
    env_id = fg.register("frognano:RepoRepair-short-v0", tasks=tasks[:2], max_steps=3)
    assert fg.register("frognano:RepoRepair-short-v0", tasks=tasks[:2], max_steps=3) == env_id  # no-op
    with pytest.raises(frognano.InvalidArgumentError, match="already registered"):
        fg.register(env_id, max_steps=5)
    env = gem.make(env_id, seed=1)
    assert env.max_steps == 3 and [t["id"] for t in env.tasks] == [t["id"] for t in tasks[:2]]
    assert gem.make(env_id, max_steps=4).max_steps == 4  # make's keyword arguments win
    child = env.spawn(max_steps=5)
    assert isinstance(child, fg.FrogNanoEnv) and child.max_steps == 5 and child.tasks == env.tasks
    with pytest.raises(NotImplementedError, match="workspace"):
        env.spawn(same_state=True)
    env.reset()
    for _ in range(2):
        action = env.sample_random_action()
        assert env.step(action)[4]["error"] is False, action
    env.close()


def test_bad_settings_raise_clear_errors(monkeypatch, tasks):
    monkeypatch.delenv("FROGNANO_TASKS", raising=False)
    with pytest.raises(frognano.InvalidArgumentError, match="FROGNANO_TASKS"):
        gem.make(fg.ENV_ID)
    with pytest.raises(frognano.TaskError, match="repo"):
        gem.make(fg.ENV_ID, tasks=[{"id": "no-repo"}])
    with pytest.raises(frognano.InvalidArgumentError, match="max_steps"):
        gem.make(fg.ENV_ID, tasks=tasks[:1], max_steps=0)
    with pytest.raises(frognano.EpisodeError):
        gem.make(fg.ENV_ID, tasks=tasks[:1]).step("ls")
    monkeypatch.setenv("FROGNANO_TASKS", str(TASKS))
    assert len(gem.make(fg.ENV_ID).tasks) == len(tasks)


def test_example():
    out = run_example("gem_env.py")
    assert "gem: frognano:RepoRepair-v0 resolved 1/1 with the reference fix" in out
