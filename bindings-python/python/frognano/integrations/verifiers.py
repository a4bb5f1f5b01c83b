"""FrogNano tasks as a verifiers environment, for ``vf-eval`` and for the trainers that drive
verifiers environments (prime-rl). verifiers has two APIs and this module serves the one the
installed release ships:

- verifiers 0.4 and newer (tested with 0.4.0) ships only the v1 API (``import verifiers.v1 as
  vf``): a ``Taskset`` of ``Task``s scored by ``@vf.reward``, a ``Harness`` that plays them and
  an ``Env`` that pairs the two. This module then exports ``FrogNanoTaskset``, ``FrogNanoTask``
  (its ``resolved`` reward grades the final repository in the sandbox), ``FrogNanoHarness``
  (the agent loop, with ``frognano.tool_schemas()`` as the model's tools) and ``FrogNanoEnv``;
  see ``frognano.integrations._verifiers_v1``.
- verifiers 0.3 (tested with 0.3.1) defaults to the classic v0 API (``import verifiers as vf``):
  this module then exports ``FrogNanoEnv``, a ``vf.MultiTurnEnv`` with a rubric that grades in
  the sandbox; see ``frognano.integrations._verifiers_v0``.

``API`` says which one was loaded ("v1" or "v0"). Both are built by ``load_environment(tasks,
max_turns=..., sampler=...)``: tasks are a task-set path as ``frognano.load_tasks`` reads or a
list of task dicts / task JSON strings (without them, the path in ``$FROGNANO_TASKS``), and a
``TaskSampler`` passed as ``sampler`` hears the outcome of every graded rollout. FrogNano
failures during a rollout are raised as verifiers' own error types, which verifiers records on
that rollout while the others go on.

verifiers 0.4 (v1), evaluated against an OpenAI-compatible server::

    import asyncio
    import verifiers.v1 as vf
    from frognano.integrations.verifiers import load_environment

    env = load_environment("tasks.jsonl", max_turns=8)
    ctx = vf.ModelContext(model="my-model", client=vf.EvalClientConfig(
        base_url="http://127.0.0.1:8000/v1", api_key_var="OPENAI_API_KEY"),
        sampling=vf.SamplingConfig(max_tokens=512))

    async def main():
        async with env.serving():
            return await asyncio.gather(*(env.run_slot(slot, ctx)
                                          for task in env.taskset for slot in env.slots(task)))

    episodes = asyncio.run(main())
    [episode.traces[0].reward for episode in episodes]

verifiers 0.3 (v0)::

    env = load_environment("tasks.jsonl", max_turns=8)
    client = vf.OpenAIChatCompletionsClient(AsyncOpenAI(base_url="http://127.0.0.1:8000/v1", api_key="-"))
    results = env.evaluate_sync(client, "my-model", sampling_args={"max_tokens": 512})

As an environment package (what ``vf-eval <id>`` and prime-rl load by id). verifiers 0.4 imports a
plugin id as a top-level module (``frognano-env`` -> ``frognano_env``) exporting the taskset, the
harness and the environment in ``__all__``; in the process that imported this module the id
``frognano-env`` already resolves to it. For other processes, install a package with one
module, ``environments/frognano_env/frognano_env.py``::

    from frognano.integrations.verifiers import *  # noqa: F401,F403
    from frognano.integrations.verifiers import __all__  # noqa: F401

and ``environments/frognano_env/pyproject.toml``::

    [project]
    name = "frognano-env"
    version = "0.1.0"
    dependencies = ["frognano[verifiers]"]

    [build-system]
    requires = ["hatchling"]
    build-backend = "hatchling.build"

    [tool.hatch.build]
    include = ["frognano_env.py"]

then (0.4) ``vf-eval frognano-env --env.taskset.tasks /abs/tasks.jsonl --env.agent.max-turns 8 -m
<model> ...``, or (0.3, where the package's ``load_environment`` is the entry point) ``vf-install
frognano-env`` and ``vf-eval frognano-env -m <model> -b <base-url> -a '{"tasks":
"/abs/tasks.jsonl", "max_turns": 8}'``. A task set's repository paths resolve against the
task-set path as given, so pass an absolute path.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from ._common import require

require("verifiers", "verifiers")


def _release() -> tuple:
    try:
        text = version("verifiers")
    except PackageNotFoundError:  # a source tree without install metadata: the current API
        return (999,)
    parts = []
    for piece in text.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


if _release() >= (0, 4):
    API = "v1"
    from ._verifiers_v1 import *  # noqa: F401,F403
    from ._verifiers_v1 import __all__ as _names
else:
    API = "v0"
    from ._verifiers_v0 import *  # noqa: F401,F403
    from ._verifiers_v0 import __all__ as _names

__all__ = list(_names)
