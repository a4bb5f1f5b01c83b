"""Token batches (the format is in torch_learner.py's docstring): writing, building, reading and
validating them, and which of their tokens carry loss."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

if __package__:  # frognano._learner_batch, inside the package
    from ._learner_common import BatchError
else:  # a top-level module beside torch_learner.py (see its imports)
    from _learner_common import BatchError


BATCH_FORMAT = "frognano-token-batch"
BATCH_VERSION = "1"
GREEDY_TEMPERATURE = 1e-5
# A rollout log-prob above this is not a log-probability (allows float32 rounding of log(1)).
MAX_LOGPROB = 1e-3


# name -> (numpy kind letters accepted, dtype it is normalised to, length: "S+1", "S", "C", "T", "P")
BATCH_TENSORS = {
    "prompt_ids": ("iu", np.int64, "P"),
    "prompt_offsets": ("iu", np.int64, "S+1"),
    "completion_ids": ("iu", np.int64, "C"),
    "completion_offsets": ("iu", np.int64, "S+1"),
    "rollout_logprobs": ("f", np.float32, "C"),
    "loss_mask": ("iub", np.uint8, "C"),
    "temperatures": ("f", np.float32, "S"),
    "top_k": ("iu", np.int64, "S"),
    "top_p": ("f", np.float32, "S"),
    "length_limited": ("iub", np.uint8, "S"),
    "step_trajectory": ("iu", np.int64, "S"),
    "step_advantages": ("f", np.float32, "S"),
    "advantages": ("f", np.float32, "T"),
    "rewards": ("f", np.float32, "T"),
    "truncated": ("iub", np.uint8, "T"),
    "resolved": ("iub", np.uint8, "T"),
    "groups": ("iu", np.int64, "T"),
}
# Per-step tensors older writers leave out, and the value each step then has.
OPTIONAL_STEP_TENSORS = {"top_k": 0, "top_p": 1.0, "length_limited": 0}


def write_batch(path, arrays: dict, metadata: dict | None = None) -> Path:
    """Writes a token batch file as given (no validation, so tests can build bad ones).

    ``metadata`` values that are not strings are JSON-encoded; ``format`` and ``version`` default
    to this module's. The write is atomic (temporary file, then rename).
    """
    from safetensors.numpy import save_file

    path = Path(path)
    meta = {"format": BATCH_FORMAT, "version": BATCH_VERSION}
    for key, value in (metadata or {}).items():
        meta[str(key)] = value if isinstance(value, str) else json.dumps(value)
    tensors = {name: np.ascontiguousarray(np.asarray(value)) for name, value in arrays.items()
               if name != "metadata"}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        save_file(tensors, str(tmp), metadata=meta)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def build_batch(trajectories: list[dict], metadata: dict | None = None) -> dict:
    """Builds batch arrays (the dict ``write_batch`` takes) from Python lists.

    Each trajectory: ``{"steps": [{"prompt": [ids], "completion": [ids], "logprobs": [floats],
    "mask": [0/1] (default all 1), "temperature": float (default 1.0), "top_k": int (default 0),
    "top_p": float (default 1.0), "length_limited": bool (default false)}], "advantage": float,
    "reward": float (default = advantage), "truncated": bool, "resolved": bool, "group": int,
    "task_id": str}``.
    """
    prompt_ids, prompt_offsets = [], [0]
    completion_ids, completion_offsets = [], [0]
    logprobs, mask, temperatures, step_trajectory, step_advantages = [], [], [], [], []
    top_k, top_p, length_limited = [], [], []
    advantages, rewards, truncated, resolved, groups, task_ids = [], [], [], [], [], []
    for index, trajectory in enumerate(trajectories):
        advantage = float(trajectory.get("advantage", 0.0))
        for step in trajectory["steps"]:
            prompt_ids.extend(step["prompt"])
            prompt_offsets.append(len(prompt_ids))
            completion = list(step["completion"])
            completion_ids.extend(completion)
            completion_offsets.append(len(completion_ids))
            logprobs.extend(step.get("logprobs", [0.0] * len(completion)))
            mask.extend(step.get("mask", [1] * len(completion)))
            temperatures.append(float(step.get("temperature", 1.0)))
            top_k.append(int(step.get("top_k", 0)))
            top_p.append(float(step.get("top_p", 1.0)))
            length_limited.append(int(bool(step.get("length_limited", False))))
            step_trajectory.append(index)
            step_advantages.append(advantage)
        advantages.append(advantage)
        rewards.append(float(trajectory.get("reward", advantage)))
        truncated.append(int(bool(trajectory.get("truncated", False))))
        resolved.append(int(bool(trajectory.get("resolved", False))))
        groups.append(int(trajectory.get("group", index)))
        task_ids.append(str(trajectory.get("task_id", f"task-{index}")))
    meta = {"format": BATCH_FORMAT, "version": BATCH_VERSION, "iteration": "0", "estimator": "grpo",
            "group_size": "1", "task_ids": json.dumps(task_ids)}
    meta.update({k: v if isinstance(v, str) else json.dumps(v) for k, v in (metadata or {}).items()})
    return {
        "prompt_ids": np.array(prompt_ids, np.int64),
        "prompt_offsets": np.array(prompt_offsets, np.int64),
        "completion_ids": np.array(completion_ids, np.int64),
        "completion_offsets": np.array(completion_offsets, np.int64),
        "rollout_logprobs": np.array(logprobs, np.float32),
        "loss_mask": np.array(mask, np.uint8),
        "temperatures": np.array(temperatures, np.float32),
        "top_k": np.array(top_k, np.int64),
        "top_p": np.array(top_p, np.float32),
        "length_limited": np.array(length_limited, np.uint8),
        "step_trajectory": np.array(step_trajectory, np.int64),
        "step_advantages": np.array(step_advantages, np.float32),
        "advantages": np.array(advantages, np.float32),
        "rewards": np.array(rewards, np.float32),
        "truncated": np.array(truncated, np.uint8),
        "resolved": np.array(resolved, np.uint8),
        "groups": np.array(groups, np.int64),
        "metadata": meta,
    }


def load_batch(path, vocab_size: int | None = None) -> dict:
    """Reads and validates a token batch file; returns its arrays plus ``"metadata"``."""
    from safetensors import safe_open

    path = Path(path)
    if not path.is_file():
        raise BatchError(f"token batch {path} does not exist")
    try:
        arrays = {}
        with safe_open(str(path), framework="np") as handle:
            metadata = dict(handle.metadata() or {})
            for name in handle.keys():
                arrays[name] = handle.get_tensor(name)
    except BatchError:
        raise
    except Exception as error:  # safetensors raises its own error types
        raise BatchError(f"token batch {path} is not a readable safetensors file: {error}") from error
    arrays["metadata"] = metadata
    return validate_batch(arrays, vocab_size=vocab_size, source=str(path))


def validate_batch(batch: dict, vocab_size: int | None = None, source: str = "token batch") -> dict:
    """Checks a batch dict (as ``load_batch`` returns or ``build_batch`` builds); returns a copy with
    dtypes normalised. Raises ``BatchError`` naming the first problem."""
    if not isinstance(batch, dict):
        raise BatchError(f"{source}: expected a dict of arrays, got {type(batch).__name__}")
    metadata = dict(batch.get("metadata") or {})
    fmt = metadata.get("format")
    if fmt != BATCH_FORMAT:
        raise BatchError(f"{source}: metadata format is {fmt!r}, expected {BATCH_FORMAT!r}")
    version = metadata.get("version")
    if version != BATCH_VERSION:
        raise BatchError(f"{source}: unsupported batch version {version!r} "
                         f"(this learner reads {BATCH_VERSION!r})")
    out: dict[str, Any] = {"metadata": metadata}
    steps_given = len(np.asarray(batch.get("temperatures", [])).reshape(-1))
    for name, (kinds, dtype, _) in BATCH_TENSORS.items():
        if name not in batch and name in OPTIONAL_STEP_TENSORS:
            out[name] = np.full(steps_given, OPTIONAL_STEP_TENSORS[name], dtype)
            continue
        if name not in batch:
            raise BatchError(f"{source}: missing tensor {name!r}")
        value = np.asarray(batch[name])
        if value.ndim != 1:
            raise BatchError(f"{source}: {name} must be 1-D, got shape {list(value.shape)}")
        if value.dtype.kind not in kinds and not (value.size == 0 and value.dtype.kind == "f"):
            raise BatchError(f"{source}: {name} has dtype {value.dtype}, expected {dtype.__name__}")
        out[name] = value.astype(dtype, copy=False)

    steps = len(out["temperatures"])
    trajectories = len(out["advantages"])
    sizes = {"S": steps, "S+1": steps + 1, "T": trajectories,
             "C": len(out["completion_ids"]), "P": len(out["prompt_ids"])}
    for name, (_, _, length) in BATCH_TENSORS.items():
        if len(out[name]) != sizes[length]:
            what = {"S": "steps", "S+1": "steps + 1", "T": "trajectories", "C": "completion tokens",
                    "P": "prompt tokens"}[length]
            raise BatchError(f"{source}: {name} has {len(out[name])} entries, expected {sizes[length]} "
                             f"({what})")
    for kind in ("prompt", "completion"):
        offsets = out[f"{kind}_offsets"]
        ids = out[f"{kind}_ids"]
        if offsets[0] != 0:
            raise BatchError(f"{source}: {kind}_offsets must start at 0, got {offsets[0]}")
        if offsets[-1] != len(ids):
            raise BatchError(f"{source}: {kind}_offsets ends at {offsets[-1]} but {kind}_ids has "
                             f"{len(ids)} tokens")
        lengths = np.diff(offsets)
        if (lengths < 0).any():
            bad = int(np.argmax(lengths < 0))
            raise BatchError(f"{source}: {kind}_offsets are not monotone at step {bad}")
        if kind == "prompt" and (lengths == 0).any():
            raise BatchError(f"{source}: step {int(np.argmax(lengths == 0))} has an empty prompt")
        if len(ids) and ids.min() < 0:
            raise BatchError(f"{source}: {kind}_ids holds a negative token id {int(ids.min())}")
        if vocab_size is not None and len(ids) and ids.max() >= vocab_size:
            raise BatchError(f"{source}: {kind}_ids holds token id {int(ids.max())}, outside the "
                             f"model's vocabulary of {vocab_size}")
    if ((out["loss_mask"] != 0) & (out["loss_mask"] != 1)).any():
        raise BatchError(f"{source}: loss_mask must hold only 0 and 1")
    traj = out["step_trajectory"]
    if steps and (traj.min() < 0 or traj.max() >= trajectories):
        bad = int(traj.max() if traj.max() >= trajectories else traj.min())
        raise BatchError(f"{source}: step_trajectory refers to trajectory {bad} but the batch has "
                         f"{trajectories} trajectories")
    if steps and (np.diff(traj) < 0).any():
        raise BatchError(f"{source}: steps are not in trajectory order (step_trajectory decreases)")
    for name in ("advantages", "step_advantages", "rewards"):
        if not np.isfinite(out[name]).all():
            raise BatchError(f"{source}: {name} holds a non-finite value at index "
                             f"{int(np.argmax(~np.isfinite(out[name])))}")
    temps = out["temperatures"]
    if not np.isfinite(temps).all() or (temps < 0).any():
        raise BatchError(f"{source}: temperatures must be finite and >= 0")
    if (out["top_k"] < 0).any():
        raise BatchError(f"{source}: top_k must be >= 0")
    top_p = out["top_p"]
    if not np.isfinite(top_p).all() or (top_p <= 0).any() or (top_p > 1).any():
        raise BatchError(f"{source}: top_p must lie in (0, 1]")
    if ((out["length_limited"] != 0) & (out["length_limited"] != 1)).any():
        raise BatchError(f"{source}: length_limited must hold only 0 and 1")
    trained = out["loss_mask"] == 1
    logprobs = out["rollout_logprobs"]
    bad = trained & ~np.isfinite(logprobs)
    if bad.any():
        raise BatchError(f"{source}: rollout_logprobs holds a non-finite value at trained token "
                         f"{int(np.argmax(bad))}")
    bad = trained & (logprobs > MAX_LOGPROB)
    if bad.any():
        index = int(np.argmax(bad))
        raise BatchError(f"{source}: rollout_logprobs[{index}] = {float(logprobs[index])} is positive; "
                         "expected log-probabilities")
    task_ids = metadata.get("task_ids")
    if task_ids is not None:
        try:
            parsed = json.loads(task_ids) if isinstance(task_ids, str) else list(task_ids)
        except (ValueError, TypeError) as error:
            raise BatchError(f"{source}: metadata task_ids is not a JSON list: {error}") from error
        if not isinstance(parsed, list) or len(parsed) != trajectories:
            raise BatchError(f"{source}: metadata task_ids must list one id per trajectory "
                             f"({trajectories})")
    return out


def trained_token_mask(batch: dict, mask_truncated: bool = False,
                       mask_length_limited: bool = True) -> np.ndarray:
    """Which completion tokens carry loss: loss_mask = 1, and (by default) not in a step whose
    generation stopped at its token limit (a cut reply, not one the model ended); with
    ``mask_truncated``, also not in a trajectory that ran out of steps. A trajectory that ran out
    of steps is still graded (it can be resolved), so masking it whole is off by default."""
    mask = batch["loss_mask"].astype(bool)
    lengths = np.diff(batch["completion_offsets"])
    drop = np.zeros(len(lengths), bool)
    if mask_length_limited and "length_limited" in batch:
        drop |= np.asarray(batch["length_limited"]).astype(bool)
    if mask_truncated and batch["truncated"].any():
        drop |= batch["truncated"][batch["step_trajectory"]].astype(bool)
    if drop.any():
        mask = mask & np.repeat(~drop, lengths)
    return mask
