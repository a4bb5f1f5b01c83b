"""frognano.integrations.gymnasium against the real gymnasium: the environment checker, whole
episodes (one resolved by the task's true fix), the vector env over EnvPool, bad input."""

import numpy as np
import pytest
from integration_support import framework, run_example

gymnasium = framework("gymnasium")
from gymnasium.utils.env_checker import check_env  # noqa: E402

import frognano  # noqa: E402
from frognano.integrations import TaskSampler, fix_actions  # noqa: E402
from frognano.integrations.gymnasium import FrogNanoEnv, FrogNanoVectorEnv  # noqa: E402


def test_check_env_passes(sandbox, tasks):
    env = FrogNanoEnv(tasks[:3], sandbox=sandbox, max_steps=5)
    check_env(env)
    made = gymnasium.make("frognano/RepoRepair-v0", tasks=tasks[:2], max_steps=5)
    check_env(made.unwrapped)
    made.close()
    env.close()
    env.close()  # twice is fine


def test_seeded_reset_draws_the_same_task_and_options_pick_one(sandbox, tasks):
    env = FrogNanoEnv(tasks, sandbox=sandbox)
    first = [env.reset(seed=s)[1]["task_id"] for s in (1, 2, 3)]
    again = [env.reset(seed=s)[1]["task_id"] for s in (1, 2, 3)]
    assert first == again
    assert len({env.reset(seed=s)[1]["task_id"] for s in range(20)}) > 1
    obs, info = env.reset(options={"task": tasks[4]["id"]})
    assert info == {"task_id": tasks[4]["id"]} and obs in env.observation_space
    obs, info = env.reset(options={"task": tasks[5]})
    assert info["task_id"] == tasks[5]["id"]
    env.close()


def test_resolving_episode_reports_to_the_sampler(sandbox, tasks):
    sampler = TaskSampler(tasks, seed=3)
    env = FrogNanoEnv(sampler=sampler, sandbox=sandbox, max_steps=20)
    obs, info = env.reset(seed=0)
    task = next(t for t in tasks if t["id"] == info["task_id"])
    obs, reward, terminated, truncated, info = env.step("test")
    assert "failed" in obs and reward == 0.0 and not terminated
    assert info["tests"]["failing"] == task["fail_to_pass"]
    for action in fix_actions(task):
        obs, reward, terminated, truncated, info = env.step(action)
        assert not info["error"], obs
    obs, reward, terminated, truncated, info = env.step("submit")
    assert terminated and reward == 1.0 and info["grading"]["resolved"] is True
    assert info["outcome"]["resolved"] is True
    assert sampler.metrics()["sampler_observed"] == 1
    with pytest.raises(frognano.EpisodeError):
        env.step("ls")
    assert env.record()["outcome"]["resolved"] is True
    env.close()


def test_malformed_actions_get_error_observations(sandbox, tasks):
    env = FrogNanoEnv(tasks[:1], sandbox=sandbox, max_steps=8)
    env.reset(seed=0)
    for action in ["", "\udcff\x00 rm -rf /", {"name": "view", "arguments": {"path": "../../etc/passwd"}},
                   {"name": "no_such_tool"}, "edit"]:
        obs, reward, terminated, truncated, info = env.step(action)
        assert info["error"] and obs in env.observation_space and reward == 0.0
    with pytest.raises(frognano.InvalidArgumentError):
        env.step(42)
    with pytest.raises(frognano.InvalidArgumentError):
        FrogNanoEnv()
    with pytest.raises(frognano.TaskError):
        FrogNanoEnv([{"no": "task"}])
    with pytest.raises(frognano.TaskError):
        env.reset(options={"task": "{not json"})
    env.close()


def test_observations_outside_the_charset_are_replaced(sandbox, make_task_with_unicode):
    env = FrogNanoEnv([make_task_with_unicode], sandbox=sandbox, max_steps=4, max_observation_length=1000)
    obs, _ = env.reset(seed=0)
    assert obs in env.observation_space and "\ufffd" in obs and len(obs) <= 1000
    wide = FrogNanoEnv([make_task_with_unicode], sandbox=sandbox, charset="é→")
    obs, _ = wide.reset(seed=0)
    assert "é" in obs and "→" in obs and obs in wide.observation_space
    env.close()
    wide.close()


@pytest.fixture
def make_task_with_unicode(tasks):
    return dict(tasks[0], id="unicode-statement", problem_statement="Café → the parser drops accents.\n" * 80)


def test_vector_env_steps_in_parallel_and_autoresets(sandbox, tasks):
    sampler = TaskSampler(tasks, seed=1)
    envs = FrogNanoVectorEnv(2, sampler=sampler, sandbox=sandbox, max_steps=2)
    obs, infos = envs.reset(seed=0)
    assert len(obs) == 2 and all(o in envs.single_observation_space for o in obs)
    assert list(infos["_task_id"]) == [True, True]
    obs, rewards, terms, truncs, infos = envs.step(["ls", "test"])
    assert rewards.dtype == np.float64 and not terms.any() and not truncs.any()
    assert "failed" in obs[1]
    obs, rewards, terms, truncs, infos = envs.step(["submit", "ls"])
    assert terms[0] and truncs[1]  # a submit, and the step budget of 2
    assert sampler.metrics()["sampler_observed"] == 2
    # Next step: both reset with new tasks (their actions are ignored).
    obs, rewards, terms, truncs, infos = envs.step(["ls", "ls"])
    assert list(infos["_task_id"]) == [True, True] and rewards.sum() == 0.0
    assert all("Fix the bug" in o for o in obs)
    picked = envs.reset(options={"tasks": [tasks[2], tasks[3]]})[1]["task_id"]
    assert list(picked) == [tasks[2]["id"], tasks[3]["id"]]
    with pytest.raises(frognano.InvalidArgumentError):
        envs.step(["ls"])
    envs.close()


def workspaces(folder):
    return sorted(path.name for path in folder.iterdir() if path.name.startswith("frognano-env-"))


def test_make_vec_reaches_the_env_pool_and_close_frees_it(tasks, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # where the environments put their workspaces
    envs = gymnasium.make_vec("frognano/RepoRepair-v0", num_envs=3, tasks=tasks[:3], max_steps=4, workers=2)
    assert isinstance(envs, FrogNanoVectorEnv) and envs.num_envs == 3
    assert envs.spec.kwargs["vectorization_mode"] == "vector_entry_point"
    obs, infos = envs.reset(seed=0)
    assert len(obs) == 3 and all("Fix the bug" in o for o in obs)
    assert len(workspaces(tmp_path)) == 3  # one per environment of the pool
    obs, rewards, terms, truncs, _ = envs.step(["test", "ls", "submit"])
    assert "failed" in obs[0] and terms.tolist() == [False, False, True] and rewards.tolist() == [0.0, 0.0, 0.0]
    envs.close()
    assert envs.closed and workspaces(tmp_path) == []
    with pytest.raises(frognano.EpisodeError, match="closed"):
        envs.step(["ls"] * 3)
    with pytest.raises(frognano.EpisodeError, match="closed"):
        envs.reset()
    envs.close()  # twice is fine
    # Gymnasium's own vectorizers still wrap the single environment when asked for.
    sync = gymnasium.make_vec("frognano/RepoRepair-v0", num_envs=2, vectorization_mode="sync", tasks=tasks[:2])
    assert type(sync).__name__ == "SyncVectorEnv" and len(sync.reset(seed=0)[0]) == 2
    sync.close()
    with pytest.raises(frognano.InvalidArgumentError, match="renders nothing"):
        gymnasium.make_vec("frognano/RepoRepair-v0", num_envs=2, tasks=tasks[:2], render_mode="ansi")


def test_example_runs():
    out = run_example("gymnasium_env.py")
    assert "check_env passed" in out and "resolved 1/1" in out
