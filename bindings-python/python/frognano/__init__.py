"""FrogNano: run repositories' test suites in WebAssembly sandboxes, from Python.

>>> import frognano
>>> sandbox = frognano.Sandbox()
>>> report = sandbox.run_tests("path/to/repo", timeout=60)
>>> report.outcome, report.passed, report.failed
('passed', 80, 0)

Agents act in a RepoEnv (Gymnasium-style reset/step) on bug-fix tasks:

>>> tasks = frognano.load_tasks("examples/tasks/sample.jsonl")
>>> env = frognano.RepoEnv(sandbox)
>>> obs, info = env.reset(tasks[0])
>>> obs, reward, terminated, truncated, info = env.step("test")

New tasks come from any repository whose suite passes: a Synthesizer injects bugs and keeps
those its tests pin down (the dicts have load_tasks' shape):

>>> synth = frognano.Synthesizer("examples/repos/textkit", sandbox=sandbox, seed=7)
>>> tasks = synth.generate(20)
>>> summary, _ = frognano.evaluate(tasks, "oracle", sandbox=sandbox)

Policies learn from reward with a GrpoTrainer (group advantages over rollouts of each task);
any object with act/learn is a policy and any object with propose/feedback a task source:

>>> policy = frognano.RepairPolicy(seed=0)
>>> trainer = frognano.GrpoTrainer(sandbox, policy, tasks, tasks_per_iteration=4)
>>> metrics = trainer.iterate()

Local language models run on ONNX Runtime: LocalModel generates with log-probs (batched,
seeded), and OnnxPolicy makes one act in the environment (evaluate, GrpoTrainer.evaluate):

>>> model = frognano.LocalModel("smollm2-135m")   # fetched and converted on first use
>>> reply = model.chat([{"role": "user", "content": "Write hello world in Python."}],
...                    max_new_tokens=64, temperature=0)
>>> print(reply["text"], reply["logprobs"][:3])
>>> summary, _ = frognano.evaluate(tasks, frognano.OnnxPolicy("smollm2-135m"), sandbox=sandbox)

ONNX Runtime's library comes from the runtime_library argument, FROGNANO_ORT_LIBRARY, this
interpreter's onnxruntime package when it is installed, or the inference environment that
frognano.setup_inference() installs into the cache.

The first Sandbox (or frognano.setup()) fetches the runtime with pip, verifies its sha256,
and compiles and snapshots it into the cache (frognano.cache_dir()); later ones start in
milliseconds.
"""

import os as _os
import sys as _sys

# The runtime assets are fetched with pip: use this interpreter's, so a virtualenv's pip works.
_os.environ.setdefault("FROGNANO_HOST_PYTHON", _sys.executable)

from . import _errors  # noqa: E402
from ._errors import *  # noqa: E402,F401,F403  (the exception hierarchy)
from ._frognano import (  # noqa: E402
    EasyToHard,
    EnvPool,
    FrontierSynthesizer,
    GrpoTrainer,
    HttpPolicy,
    LocalModel,
    OnnxPolicy,
    RepairPolicy,
    RepoEnv,
    Sandbox,
    StaticCurriculum,
    Synthesizer,
    TestReport,
    TestResult,
    __version__,
    cache_dir,
    convert_checkpoint,
    evaluate,
    fetch_model,
    group_advantages,
    known_models,
    learnability,
    load_tasks,
    make_tiny_model,
    mutation_operators,
    parse_action,
    repair_feature_names,
    save_tasks,
    save_token_batch,
    setup,
    setup_inference,
    synthesize,
    to_swe_bench,
    tool_instructions,
    tool_schemas,
    train,
)

from ._frognano import _load_token_batch_raw, _token_batch_raw  # noqa: E402


def _numpy_arrays(raw: dict) -> dict:
    import numpy as np

    arrays = {}
    for name, value in raw.items():
        if name == "metadata":
            arrays[name] = dict(value)
        else:
            dtype, data = value
            arrays[name] = np.frombuffer(data, dtype=dtype).copy()
    return arrays


def token_batch(batch: dict) -> dict:
    """The model steps of a TrainingBatch dict as flat numpy arrays (needs numpy).

    Each model step is its own (prompt, completion) pair: prompt_ids / prompt_offsets (int64;
    step s's prompt is prompt_ids[prompt_offsets[s]:prompt_offsets[s + 1]]), completion_ids /
    completion_offsets (int64), rollout_logprobs (float32, one per completion token),
    loss_mask (uint8), temperatures, step_trajectory, step_advantages (per step), advantages,
    rewards, truncated, resolved, groups (per trajectory), and "metadata" (format, version,
    iteration, estimator, group_size, task_ids). What frognano.torch_learner.TorchLearner.learn
    takes, and what save_token_batch writes. A batch a token learner cannot use raises
    InvalidArgumentError."""
    return _numpy_arrays(_token_batch_raw(batch))


def load_token_batch(path) -> dict:
    """Reads a token batch file (save_token_batch, or a trainer's batches) as token_batch's
    arrays (needs numpy)."""
    return _numpy_arrays(_load_token_batch_raw(path))


__all__ = [
    "Sandbox",
    "TestReport",
    "TestResult",
    "RepoEnv",
    "EnvPool",
    "evaluate",
    "load_tasks",
    "save_tasks",
    "to_swe_bench",
    "Synthesizer",
    "synthesize",
    "mutation_operators",
    "RepairPolicy",
    "repair_feature_names",
    "GrpoTrainer",
    "FrontierSynthesizer",
    "StaticCurriculum",
    "EasyToHard",
    "group_advantages",
    "learnability",
    "train",
    "token_batch",
    "save_token_batch",
    "load_token_batch",
    "LocalModel",
    "OnnxPolicy",
    "HttpPolicy",
    "fetch_model",
    "convert_checkpoint",
    "known_models",
    "setup_inference",
    "make_tiny_model",
    "parse_action",
    "tool_instructions",
    "tool_schemas",
    "setup",
    "cache_dir",
    "__version__",
    *_errors.__all__,
]
