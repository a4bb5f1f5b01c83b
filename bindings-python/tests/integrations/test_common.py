"""The framework-free helpers every adapter shares (frognano.integrations._common): the opening
observations that dataset builders put in their prompt columns."""

import frognano
from frognano.integrations import _common

REPO_ENV = frognano.RepoEnv


class CountingRepoEnv:
    """frognano.RepoEnv, counting the environments made and the resets done."""

    made = 0
    resets = 0

    def __init__(self, *args, **kwargs):
        CountingRepoEnv.made += 1
        self.env = REPO_ENV(*args, **kwargs)

    def reset(self, task):
        CountingRepoEnv.resets += 1
        return self.env.reset(task)

    def close(self):
        self.env.close()


def test_first_prompts_render_many_tasks_with_one_environment(tasks, sandbox, monkeypatch):
    fresh = []
    for task in tasks:  # what one RepoEnv per task shows
        with frognano.RepoEnv(sandbox, observation_chars=300) as env:
            fresh.append(env.reset(task)[0])
    monkeypatch.setattr(frognano, "RepoEnv", CountingRepoEnv)
    twice = tasks + tasks  # back and forth between repositories and tasks of one repository
    prompts = _common.first_prompts(twice, 300, sandbox)
    assert prompts == fresh + fresh
    assert "## Problem" in prompts[0] and "## Tools" in prompts[0]
    assert (CountingRepoEnv.made, CountingRepoEnv.resets) == (1, len(twice))
    assert _common.first_prompt(tasks[1], 300, sandbox) == fresh[1]
    assert CountingRepoEnv.made == 2
