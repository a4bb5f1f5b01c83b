"""FrogNano inside the RL trainers people use.

One thin module per framework, each importing its framework only when imported (a missing one
raises an ImportError naming the extra to install, e.g. ``pip install 'frognano[trl]'``):

- ``frognano.integrations.gymnasium``: ``FrogNanoEnv`` (a ``gymnasium.Env`` over ``RepoEnv``)
  and ``FrogNanoVectorEnv`` (over ``EnvPool``).
- ``frognano.integrations.trl``: an ``environment_factory`` class and a ``rollout_func`` for
  TRL's ``GRPOTrainer``, and a dataset builder from task sets.
- ``frognano.integrations.verl``: an ``AgentLoopBase`` subclass (token in, token out), its
  registration config and a ``compute_score`` reward function.
- ``frognano.integrations.skyrl``: a skyrl-gym ``BaseTextEnv``, its ``register`` helper and
  dataset rows.
- ``frognano.integrations.verifiers``: ``load_environment``; under verifiers 0.4 a v1 ``Taskset``,
  ``Harness`` and ``Env`` (a ``resolved`` reward graded in the sandbox), under 0.3 a v0
  ``MultiTurnEnv``.
- ``frognano.integrations.openrlhf``: ``AgentInstance`` / ``AgentExecutor`` for
  ``--agent_func_path``.
- ``frognano.integrations.openenv``: FrogNano environments served over OpenEnv's HTTP/WebSocket
  API (``create_app``, ``serve_openenv``, ``start_server``) and a typed OpenEnv client.
- ``frognano.integrations.gem``: a GEM ``Env`` registered as ``frognano:RepoRepair-v0`` for
  ``gem.make`` (what ROLL and rLLM use).

Shared by all of them, and needing no framework: ``TaskSampler``, the curriculum as a service
(any task source, the ``FrontierSynthesizer`` included, as a thread-safe iterator of tasks with
``observe(results)`` feedback and a picklable state), and ``TextEpisode``, one episode of a task
driven by text actions with a reward graded by the task's tests in the sandbox; and
``patch_actions`` / ``fix_actions``, a unified diff (or a task's reference fix) as the
environment's tool calls.
"""

from ._common import (TESTED_VERSIONS, TextEpisode, first_prompt, first_prompts, fix_actions, patch_actions,
                      reverse_patch, shared_sandbox, task_json, task_list, task_of, task_of_row)
from .curriculum import TaskSampler, outcome_of

__all__ = [
    "TESTED_VERSIONS",
    "TaskSampler",
    "TextEpisode",
    "first_prompt",
    "first_prompts",
    "fix_actions",
    "outcome_of",
    "patch_actions",
    "reverse_patch",
    "shared_sandbox",
    "task_json",
    "task_list",
    "task_of",
    "task_of_row",
]
