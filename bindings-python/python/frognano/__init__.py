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

evaluate, synthesize and corpus_build spread their work over a Ray cluster when given
ray_address (frognano.distributed; needs pip install 'frognano[ray]'):

>>> summary, records = frognano.evaluate(tasks, "oracle", ray_address="auto")

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
    LanguageModelPolicy,
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
    corpus_add,
    corpus_entries,
    corpus_summary,
    eval_report,
    fetch_model,
    group_advantages,
    known_models,
    learnability,
    load_tasks,
    make_tiny_model,
    mutation_operators,
    parse_action,
    read_corpus_summary,
    repair_feature_names,
    save_tasks,
    save_token_batch,
    setup,
    setup_inference,
    to_swe_bench,
    tool_instructions,
    tool_schemas,
)

from ._frognano import _load_token_batch_raw, _token_batch_raw  # noqa: E402
from . import _frognano  # noqa: E402


def evaluate(tasks, policy=None, *, sandbox=None, workers=None, max_steps=30, out=None,
             ray_address=None, actors=None, max_retries=2, shared_paths=False, progress=None):
    """Runs policy on every task (one episode each) and returns (report, records).

    policy: "oracle" (default), "noop", "random[:SEED]", "repair[:CHECKPOINT]", "onnx:MODEL",
    "openai:URL@MODEL", a RepairPolicy, OnnxPolicy or HttpPolicy, or any object with
    act(contexts). out: write the records as JSONL.

    ray_address ("auto", "HOST:PORT", "ray://...", "local") runs the episodes on a Ray
    cluster's FrogNano workers instead (frognano.distributed.Cluster): actors workers with
    workers environments each (default: one per CPU, one environment each), a worker that dies
    has its episodes retried up to max_retries times, and the records come back in task order.
    There the policy must travel: a spec string, a RepairPolicy, or a picklable object.
    progress(done, total) sees each finished episode."""
    if ray_address is None:
        return _frognano.evaluate(tasks, policy, sandbox=sandbox, workers=workers,
                                  max_steps=max_steps, out=out)
    from . import distributed

    with distributed.connect(ray_address, actors=actors, envs_per_actor=workers,
                             max_retries=max_retries, shared_paths=shared_paths) as cluster:
        return cluster.evaluate(tasks, policy, max_steps=max_steps, out=out, progress=progress)


def synthesize(repo, n, *, ray_address=None, shards=None, actors=None, max_retries=2,
               **kwargs):
    """Synthesizer(repo, **kwargs).generate(n) and its stats: (tasks, stats).

    ray_address runs it on a Ray cluster as `shards` syntheses (default: one per worker) with
    seeds seed, seed + 1, ...; their tasks are merged without duplicates (up to n). One shard
    gives the tasks of the single-machine call with the same seed."""
    if ray_address is None:
        return _frognano.synthesize(repo, n, **kwargs)
    from . import distributed

    if "sandbox" in kwargs:
        raise InvalidArgumentError("sandbox= is for single-machine runs: each worker of the "
                                   "cluster has its own")
    seed = kwargs.pop("seed", 0)
    with distributed.connect(ray_address, actors=actors, max_retries=max_retries) as cluster:
        return cluster.synthesize(repo, n, shards=shards, seed=seed, **kwargs)


def train(config=None, out=None, *, sandbox=None, progress=None, ray_address=None,
          actors=None, max_retries=2):
    """The whole training job (frognano train): held-out synthesis, training, evaluation.
    Returns the TrainReport as a dict. progress(event, data) sees "stage" and "iteration".

    ray_address runs the training rollouts (the bulk of the work) on a Ray cluster's workers,
    the repair policy's state travelling each iteration; synthesis, learning and the held-out
    evaluation stay here."""
    if ray_address is None:
        return _frognano.train(config, out, sandbox=sandbox, progress=progress)
    from . import distributed

    return distributed.train(config, out, address=ray_address, sandbox=sandbox,
                             progress=progress, actors=actors, max_retries=max_retries)


def corpus_build(corpus, *, only=None, jobs=0, timeout=180.0, retry_failed=False,
                 rebuild=False, sandbox=None, progress=None, ray_address=None, actors=None,
                 max_retries=2):
    """Builds a corpus's unfinished entries (frognano corpus build) and returns built, kept,
    ready, failed, unfinished, seconds and manifests (the entries finished by this call).

    ray_address builds one entry per worker at a time on a Ray cluster; the corpus folder must
    be on a path every node shares. progress(id, message) on one machine, progress(done,
    total) on a cluster."""
    if ray_address is None:
        return _frognano.corpus_build(corpus, only=only, jobs=jobs, timeout=timeout,
                                      retry_failed=retry_failed, rebuild=rebuild,
                                      sandbox=sandbox, progress=progress)
    from . import distributed

    manifests = []
    with distributed.connect(ray_address, actors=actors, max_retries=max_retries,
                             shared_paths=True) as cluster:
        summary = cluster.build_corpus(corpus, only=only, timeout=timeout,
                                       retry_failed=retry_failed, rebuild=rebuild,
                                       progress=progress, on_manifest=manifests.append)
    summary["manifests"] = manifests
    return summary


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
    loss_mask (uint8), temperatures, top_k, top_p, length_limited (1: the reply was cut at its
    token limit), step_trajectory, step_advantages (per step), advantages,
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
    "eval_report",
    "corpus_add",
    "corpus_entries",
    "corpus_build",
    "corpus_summary",
    "read_corpus_summary",
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
    "LanguageModelPolicy",
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
