#!/usr/bin/env python3
"""FrogNano reference PyTorch learner: one policy-gradient update per token batch.

Standalone: imports only the standard library, numpy, torch, transformers, safetensors and
(for LoRA) peft. It never imports the compiled ``frognano`` extension, so it runs under any Python
that has those packages; the Rust trainer runs it as a script (``serve``).

Token batch file (safetensors, written by the Rust trainer)
-----------------------------------------------------------
``__metadata__`` (strings): ``format`` = "frognano-token-batch", ``version`` = "1", ``iteration``,
``estimator``, ``group_size``, ``task_ids`` (JSON list, one per trajectory). Tensors, one row per
model step (each step is its own (prompt, completion) pair, steps in trajectory order), S steps and
T trajectories:

  prompt_ids int64 [P], prompt_offsets int64 [S+1]; completion_ids int64 [C],
  completion_offsets int64 [S+1]; rollout_logprobs float32 [C]; loss_mask uint8 [C];
  temperatures float32 [S]; step_trajectory int64 [S]; step_advantages float32 [S];
  advantages, rewards float32 [T]; truncated, resolved uint8 [T]; groups int64 [T]; and, optional
  (older files lack them): top_k int64 [S] (0: none), top_p float32 [S] (1: none), length_limited
  uint8 [S] (1: the step's generation stopped at its token limit).

``rollout_logprobs`` are the log-probs of the distribution each token was drawn from:
``log_softmax(logits / T)`` at the step's rollout temperature ``T`` (``T = 1`` when ``T <= 1e-5``,
greedy decoding), renormalised over the tokens the step's top-k / top-p kept. The learner
recomputes exactly that distribution (the same truncation from its own logits, the drawn token
always kept), so importance ratios compare like with like.

Objective (per trained token: ``loss_mask = 1``; with ``mask_length_limited`` (default) not in a
step whose generation was cut at its token limit, and with ``mask_truncated`` not in a trajectory
that ran out of steps; ``A`` = the step's advantage, ``r = exp(logp - rollout_logp)``)
--------------------------------------------------------------------------------------------------
* DAPO token-level clipping: ``surrogate = min(r' A, clip(r, 1 - clip_low, 1 + clip_high) A)``.
  Tokens with ``A > 0, r > 1 + clip_high`` or ``A < 0, r < 1 - clip_low`` get no gradient.
* Truncated importance sampling (``ratio_cap``, default 3.0): positive-advantage tokens are already
  bounded by ``clip_high``, but for ``A < 0`` the PPO objective keeps ``r A`` for any large ``r``.
  ``r'`` is ``r`` truncated at ``ratio_cap`` as a detached weight: where ``r > ratio_cap`` the
  token contributes ``ratio_cap * A * grad(logp)`` (value ``ratio_cap * A``) instead of growing
  without bound. Every token's gradient weight is therefore at most ``max(1 + clip_high,
  ratio_cap)``. ``ratio_cap = 0`` disables the truncation.
* Optional KL to the initial policy (``kl_coef > 0``; k3 estimator
  ``exp(ref - logp) - (ref - logp) - 1``), added per token. The frozen reference is loaded only
  then (with LoRA: the base model with the adapter disabled, no second copy).
* A batch whose trained tokens all have advantage 0 (and no KL term) takes no optimizer step:
  AdamW's momentum would still move the weights.
* The first batch a learner sees is checked against its own log-probs before any update: a mean
  |log-ratio| above ``max_initial_log_ratio`` means the rollout log-probs do not come from this
  policy (for example a server that reports temperature-1 log-probs while sampling at another
  temperature) and fails with a ``BatchError`` instead of training on wrong ratios.
* Length normalisation of the summed token losses: ``dr_grpo`` (default, Dr. GRPO: divide by
  ``number of steps in the (mini)batch * max_completion_tokens``, a constant that does not depend
  on how long the completions were, so long and short answers are weighted per token alike and
  there is no length bias), ``token`` (mean over trained tokens, DAPO) or ``sequence`` (mean per
  step, then mean over steps that have trained tokens, GRPO).

The batch is split into ``minibatches`` optimizer steps (whole trajectories each); each is processed
in micro batches of ``micro_batch_size`` steps with gradient accumulation, then the gradient is
clipped to ``max_grad_norm`` and AdamW steps. The policy runs with dropout off (LoRA dropout
excepted), so the learner's log-probs are the rollout policy's. With ``dtype = "bfloat16"`` (CUDA)
weights and optimizer state stay float32 and the forward runs under bf16 autocast; the LM head
and log-softmax are always float32. Logits are the decoder's last hidden states at the scored
positions through the output embedding (right-padded micro batches, no attention mask needed
under causal attention), i.e. llama-family models (llama, qwen2, mistral); architectures that
post-process logits (soft-capping, logit scaling) are not covered.

Weights leave as Hugging Face names in float32 (``state_tensors``, LoRA merged without touching
the trained model): ``save_hf`` writes a checkpoint folder, ``export_onnx`` hands them in process
to ``frognano_models.export_onnx`` (found via the config's ``converter`` path, then
``$FROGNANO_CONVERTER``, then ``import frognano_models``, then the repository's
``llm/python/frognano_models.py``). ``save_checkpoint`` writes one torch file (weights, or the
adapter with LoRA; AdamW state; torch/numpy/python RNG states; step counts), atomically.

Subcommands
-----------
  learn  --model DIR --batch FILE [--config JSON] [--out DIR]   one update; prints stats JSON
  serve                                                         JSON lines on stdin/stdout

``serve`` answers one JSON object per line on stdout (all logging goes to stderr):

  {"op":"init","model":DIR,"config":{...}} -> {"ok":true,"device":..,"parameters":N,"trainable":N}
  {"op":"learn","batch":PATH}               -> {"ok":true,"stats":{...}}
  {"op":"logprobs","batch":PATH,"out":PATH} -> {"ok":true}  (safetensors with tensor "logprobs")
  {"op":"export_onnx","dir":DIR,"precisions":["fp32"]} -> {"ok":true,"seconds":s,"folders":{..}}
      (optional "write_safetensors": false skips model.safetensors in the fp32 folder)
  {"op":"save_hf","dir":DIR} / {"op":"save","path":P} / {"op":"load","path":P} -> {"ok":true}
  {"op":"shutdown"}                         -> {"ok":true}, then exits

Any failure answers ``{"ok":false,"error":"one line","kind":K}`` with K one of "batch", "config",
"model", "io", "internal" (a malformed request or an unknown op is "internal") and the server keeps
serving.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.util
import inspect
import json
import logging
import math
import os
import random
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

BATCH_FORMAT = "frognano-token-batch"
BATCH_VERSION = "1"
CHECKPOINT_FORMAT = "frognano-learner-checkpoint"
CHECKPOINT_VERSION = 1
GREEDY_TEMPERATURE = 1e-5
# A rollout log-prob above this is not a log-probability (allows float32 rounding of log(1)).
MAX_LOGPROB = 1e-3
# Log-ratios are clamped before exp() so that a wildly off-policy token cannot overflow.
MAX_LOG_RATIO = 20.0
NORMALIZATIONS = ("dr_grpo", "token", "sequence")
DEFAULT_TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
TOKENIZER_FILES = (
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
    "merges.txt", "tokenizer.model", "added_tokens.json", "chat_template.jinja",
    "chat_template.json", "generation_config.json",
)
CONVERTER_ENV = "FROGNANO_CONVERTER"
MODULE_DIR = Path(__file__).resolve().parent

log = logging.getLogger("frognano.torch_learner")


# ----------------------------------------------------------------------------------------------
# Errors
# ----------------------------------------------------------------------------------------------

class LearnerError(Exception):
    """Base class; ``kind`` is the serve protocol's error kind."""

    kind = "internal"


class BatchError(LearnerError, ValueError):
    """The token batch is malformed."""

    kind = "batch"


class ConfigError(LearnerError, ValueError):
    """The learner configuration is invalid."""

    kind = "config"


class ModelError(LearnerError, RuntimeError):
    """The model could not be loaded, trained or exported."""

    kind = "model"


# ----------------------------------------------------------------------------------------------
# Token batches
# ----------------------------------------------------------------------------------------------

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


def _truncate_logits(logits, targets, top_k: np.ndarray, top_p: np.ndarray):
    """The tempered logits with every token outside each row's top-k / top-p set at -inf, as the
    rollout sampler drew them (top-k first, then the smallest set of most likely tokens whose
    probability reaches top-p); each row's target token is always kept, so that a token the
    rollout drew stays scorable after the weights moved. Rows without truncation pass as they
    are; the kept set is chosen without gradient, the kept logits keep theirs."""
    torch = _torch()
    vocab = logits.shape[-1]
    rows = np.nonzero(((top_k > 0) & (top_k < vocab)) | (top_p < 1.0))[0]
    if len(rows) == 0:
        return logits
    with torch.no_grad():
        index = torch.from_numpy(rows).to(logits.device)
        sub = logits[index]
        ordered, order = torch.sort(sub, dim=-1, descending=True)
        rank = torch.arange(vocab, device=logits.device)[None, :]
        k = torch.from_numpy(np.where(top_k[rows] > 0, top_k[rows], vocab)).to(logits.device)
        keep_sorted = rank < k[:, None]
        probs = torch.softmax(ordered.masked_fill(~keep_sorted, float("-inf")), dim=-1)
        before = torch.cumsum(probs, dim=-1) - probs  # mass of the more likely kept tokens
        p = torch.from_numpy(top_p[rows].astype(np.float32)).to(logits.device)
        keep_sorted &= (before < p[:, None]) | (p[:, None] >= 1.0)
        keep_sorted[:, 0] = True
        keep = torch.zeros_like(keep_sorted).scatter(1, order, keep_sorted)
        keep[torch.arange(len(rows), device=logits.device), targets[index]] = True
        mask = torch.ones(logits.shape, dtype=torch.bool, device=logits.device)
        mask[index] = keep
    return logits.masked_fill(~mask, float("-inf"))


# ----------------------------------------------------------------------------------------------
# Configuration
# ----------------------------------------------------------------------------------------------

@dataclass
class LearnerConfig:
    """Learner hyper-parameters (see the module docs for the objective).

    ``learning_rate`` None resolves to 1e-6 for full fine-tuning (the usual GRPO/DAPO rate; Adam
    makes the step size per weight about the learning rate whatever the loss scale) and 1e-5 with
    LoRA (LoRA's best rate is about 10x full fine-tuning's).
    """

    learning_rate: float | None = None
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    warmup_steps: int = 0  # linear learning-rate warm-up over this many optimizer steps
    clip_low: float = 0.2
    clip_high: float = 0.28
    ratio_cap: float = 3.0  # truncated IS for negative advantages; 0 disables
    normalization: str = "dr_grpo"
    max_completion_tokens: int = 384  # Dr. GRPO's constant normaliser
    kl_coef: float = 0.0
    mask_length_limited: bool = True  # no loss on replies cut at the token limit
    mask_truncated: bool = False  # no loss on whole trajectories that ran out of steps
    max_initial_log_ratio: float = 0.5  # first-batch check of the rollout log-probs; 0 disables
    micro_batch_size: int = 4  # steps per forward pass
    minibatches: int = 1  # optimizer steps per batch
    max_grad_norm: float = 1.0  # 0 disables clipping (the norm is still reported)
    lora_rank: int = 0
    lora_alpha: float = 16.0
    lora_dropout: float = 0.0
    target_modules: tuple[str, ...] = DEFAULT_TARGET_MODULES
    gradient_checkpointing: bool = False
    seed: int = 0
    device: str = "auto"
    dtype: str = "float32"
    num_threads: int = 0  # torch CPU threads; 0 keeps torch's default
    converter: str | None = None  # path of frognano_models.py (or its folder) for export_onnx

    @classmethod
    def from_dict(cls, values: dict | None) -> "LearnerConfig":
        values = dict(values or {})
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ConfigError(f"unknown learner config key(s): {', '.join(unknown)} "
                              f"(known: {', '.join(sorted(names))})")
        if "betas" in values:
            values["betas"] = tuple(values["betas"])
        if "target_modules" in values:
            values["target_modules"] = tuple(values["target_modules"])
        config = cls(**values)
        config.validate()
        return config

    def validate(self) -> None:
        def check(condition: bool, message: str) -> None:
            if not condition:
                raise ConfigError(message)

        def number(name: str) -> float:
            value = getattr(self, name)
            check(isinstance(value, (int, float)) and not isinstance(value, bool)
                  and math.isfinite(value), f"{name} must be a finite number, got {value!r}")
            return float(value)

        if self.learning_rate is not None:
            check(number("learning_rate") > 0, "learning_rate must be > 0")
        check(number("weight_decay") >= 0, "weight_decay must be >= 0")
        check(len(self.betas) == 2 and all(0 <= float(b) < 1 for b in self.betas),
              f"betas must be two numbers in [0, 1), got {self.betas!r}")
        check(number("eps") > 0, "eps must be > 0")
        check(0 <= number("clip_low") < 1, "clip_low must be in [0, 1)")
        check(number("clip_high") >= 0, "clip_high must be >= 0")
        cap = number("ratio_cap")
        check(cap == 0 or cap >= 1 + self.clip_high,
              f"ratio_cap must be 0 (off) or >= 1 + clip_high, got {cap}")
        check(self.normalization in NORMALIZATIONS,
              f"normalization must be one of {', '.join(NORMALIZATIONS)}, got {self.normalization!r}")
        for name in ("max_completion_tokens", "micro_batch_size", "minibatches"):
            value = getattr(self, name)
            check(isinstance(value, int) and not isinstance(value, bool) and value >= 1,
                  f"{name} must be an integer >= 1, got {value!r}")
        for name in ("warmup_steps", "lora_rank", "seed", "num_threads"):
            value = getattr(self, name)
            check(isinstance(value, int) and not isinstance(value, bool) and value >= 0,
                  f"{name} must be an integer >= 0, got {value!r}")
        check(number("kl_coef") >= 0, "kl_coef must be >= 0")
        check(number("max_initial_log_ratio") >= 0, "max_initial_log_ratio must be >= 0")
        for name in ("mask_length_limited", "mask_truncated"):
            check(isinstance(getattr(self, name), bool), f"{name} must be true or false")
        check(number("max_grad_norm") >= 0, "max_grad_norm must be >= 0")
        check(number("lora_alpha") > 0, "lora_alpha must be > 0")
        check(0 <= number("lora_dropout") < 1, "lora_dropout must be in [0, 1)")
        check(len(self.target_modules) > 0 and all(isinstance(m, str) for m in self.target_modules),
              "target_modules must be a non-empty list of module names")
        check(self.device in ("auto", "cpu", "cuda") or str(self.device).startswith("cuda:"),
              f"device must be auto, cpu, cuda or cuda:N, got {self.device!r}")
        check(self.dtype in ("float32", "bfloat16"), f"dtype must be float32 or bfloat16, got {self.dtype!r}")

    def resolved_learning_rate(self) -> float:
        if self.learning_rate is not None:
            return float(self.learning_rate)
        return 1e-5 if self.lora_rank > 0 else 1e-6

    def to_dict(self) -> dict:
        values = dataclasses.asdict(self)
        values["betas"] = list(self.betas)
        values["target_modules"] = list(self.target_modules)
        return values


# ----------------------------------------------------------------------------------------------
# The learner
# ----------------------------------------------------------------------------------------------

def _torch():
    import torch

    return torch


def seed_everything(seed: int) -> None:
    torch = _torch()
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


class TorchLearner:
    """Policy-gradient learner over a Hugging Face causal LM checkpoint (see the module docs)."""

    def __init__(self, model_dir, config: LearnerConfig | dict | None = None):
        torch = _torch()
        self.config = config if isinstance(config, LearnerConfig) else LearnerConfig.from_dict(config)
        self.config.validate()
        cfg = self.config
        self.model_dir = Path(model_dir)
        if not (self.model_dir / "config.json").is_file():
            raise ModelError(f"{self.model_dir} is not a Hugging Face model folder (no config.json)")
        if cfg.num_threads:
            torch.set_num_threads(cfg.num_threads)
        if cfg.device == "auto":
            self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        else:
            if cfg.device.startswith("cuda") and not torch.cuda.is_available():
                raise ConfigError(f"device {cfg.device!r} requested but CUDA is not available")
            self.device = torch.device(cfg.device)
        if cfg.dtype == "bfloat16" and self.device.type != "cuda":
            raise ConfigError("dtype bfloat16 needs a CUDA device (use float32 on CPU)")
        self.autocast_dtype = torch.bfloat16 if cfg.dtype == "bfloat16" else None
        seed_everything(cfg.seed)

        self.model = self._load_model()
        self.vocab_size = int(self.model.get_output_embeddings().weight.shape[0])
        self.is_lora = cfg.lora_rank > 0
        if self.is_lora:
            self.model = self._wrap_lora(self.model)
        self.model.to(self.device)
        if cfg.gradient_checkpointing:
            options = {"use_reentrant": False}
            if hasattr(self.model, "activation_checkpointing_enable"):  # transformers >= 5
                self.model.activation_checkpointing_enable(activation_checkpointing_kwargs=options)
            else:
                self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=options)
            if self.is_lora:
                self.model.enable_input_require_grads()
        self.model.train()  # dropout itself is disabled in _load_model (LoRA dropout excepted)

        self.reference = None
        if cfg.kl_coef > 0 and not self.is_lora:
            self.reference = self._load_model().to(self.device).eval()
            for parameter in self.reference.parameters():
                parameter.requires_grad_(False)

        self.trainable = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            self.trainable, lr=cfg.resolved_learning_rate(), betas=tuple(cfg.betas), eps=cfg.eps,
            weight_decay=cfg.weight_decay)
        self.optimizer_steps = 0
        self.updates = 0  # learn() calls that changed the weights
        self.checked_rollouts = False  # the first batch's log-probs are checked once
        self.last_export = None
        log.info("learner ready: %s on %s, %d parameters (%d trainable)", self.model_dir,
                 self.device, self.parameter_count(), self.trainable_count())

    # -- setup -----------------------------------------------------------------------------------

    def _load_model(self):
        torch = _torch()
        from transformers import AutoModelForCausalLM

        try:
            model = AutoModelForCausalLM.from_pretrained(str(self.model_dir), dtype=torch.float32)
        except Exception as error:
            raise ModelError(f"cannot load the model in {self.model_dir}: {_one_line(error)}") from error
        model.config.use_cache = False
        _disable_dropout(model)
        return model

    def _wrap_lora(self, model):
        try:
            from peft import LoraConfig, get_peft_model
        except ImportError as error:
            raise ConfigError("lora_rank > 0 needs the peft package") from error
        cfg = self.config
        present = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
        targets = [m for m in cfg.target_modules if m in present]
        if not targets:
            raise ConfigError(f"none of target_modules {list(cfg.target_modules)} exist in the model")
        lora = LoraConfig(r=cfg.lora_rank, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                          target_modules=targets, bias="none", task_type="CAUSAL_LM")
        return get_peft_model(model, lora)

    def _base_model(self):
        return self.model.get_base_model() if self.is_lora else self.model

    def parameter_count(self) -> int:
        return int(sum(p.numel() for p in self.model.parameters()))

    def trainable_count(self) -> int:
        return int(sum(p.numel() for p in self.trainable))

    # -- forward ---------------------------------------------------------------------------------

    def _autocast(self):
        torch = _torch()
        if self.autocast_dtype is None:
            import contextlib

            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype)

    def _micro_batches(self, batch: dict, steps: list[int]) -> list[list[int]]:
        """Steps grouped into forward passes, longest first, similar lengths together."""
        lengths = np.diff(batch["prompt_offsets"]) + np.diff(batch["completion_offsets"])
        order = sorted(steps, key=lambda s: (-int(lengths[s]), s))
        size = self.config.micro_batch_size
        return [order[i:i + size] for i in range(0, len(order), size)]

    def _forward_logprobs(self, model, batch: dict, steps: list[int], token_sel: np.ndarray | None,
                          want_entropy: bool):
        """Runs one micro batch; returns (flat token indices, logprobs, entropy or None, processed).

        ``token_sel`` (bool [C]) chooses which completion tokens get logits (None: all)."""
        torch = _torch()
        po, co = batch["prompt_offsets"], batch["completion_offsets"]
        rows, positions, targets, token_index, temps, top_ks, top_ps = [], [], [], [], [], [], []
        inputs = []
        for row, s in enumerate(steps):
            prompt = batch["prompt_ids"][po[s]:po[s + 1]]
            completion = batch["completion_ids"][co[s]:co[s + 1]]
            ids = np.concatenate([prompt, completion[:-1]])
            inputs.append(ids)
            tokens = np.arange(co[s], co[s + 1])
            local = np.arange(len(completion))
            if token_sel is not None:
                keep = token_sel[co[s]:co[s + 1]]
                tokens, local = tokens[keep], local[keep]
            rows.append(np.full(len(local), row))
            positions.append(len(prompt) - 1 + local)
            targets.append(completion[local])
            token_index.append(tokens)
            temperature = float(batch["temperatures"][s])
            greedy = temperature <= GREEDY_TEMPERATURE
            temps.append(np.full(len(local), 1.0 if greedy else temperature))
            # Greedy steps report the model's own distribution: no truncation.
            top_ks.append(np.full(len(local), 0 if greedy else int(batch["top_k"][s])))
            top_ps.append(np.full(len(local), 1.0 if greedy else float(batch["top_p"][s])))
        width = max(len(ids) for ids in inputs)
        # Right padding: under causal attention no real position ever sees a pad, so no
        # attention mask is needed and the default positions 0..n-1 are each row's own.
        padded = np.zeros((len(inputs), width), np.int64)
        for row, ids in enumerate(inputs):
            padded[row, :len(ids)] = ids
        processed = int(sum(len(ids) for ids in inputs))
        rows_t = torch.from_numpy(np.concatenate(rows)).to(self.device)
        pos_t = torch.from_numpy(np.concatenate(positions)).to(self.device)
        targets_t = torch.from_numpy(np.concatenate(targets)).to(self.device)
        temps_t = torch.from_numpy(np.concatenate(temps).astype(np.float32)).to(self.device)
        with self._autocast():
            decoder = model.get_decoder()
            hidden = decoder(input_ids=torch.from_numpy(padded).to(self.device), use_cache=False)
            hidden = hidden.last_hidden_state if hasattr(hidden, "last_hidden_state") else hidden[0]
        # Only the scored positions go through the LM head, in float32 even under bf16 autocast:
        # log-ratios of a few hundredths matter, and bf16 logits are coarser than that.
        selected = hidden[rows_t, pos_t].float()
        if self.autocast_dtype is not None:
            with torch.autocast(device_type=self.device.type, enabled=False):
                logits = model.get_output_embeddings()(selected)
        else:
            logits = model.get_output_embeddings()(selected)
        logits = logits.float() / temps_t[:, None]
        logits = _truncate_logits(logits, targets_t, np.concatenate(top_ks), np.concatenate(top_ps))
        logp_all = torch.log_softmax(logits, dim=-1)
        logp = logp_all.gather(1, targets_t[:, None]).squeeze(1)
        entropy = None
        if want_entropy:
            with torch.no_grad():
                probs = logp_all.exp()
                entropy = -(probs * torch.where(probs > 0, logp_all, 0.0)).sum(-1)
        return np.concatenate(token_index), logp, entropy, processed

    # -- public API ------------------------------------------------------------------------------

    def _prepare(self, batch) -> dict:
        if isinstance(batch, (str, os.PathLike)):
            return load_batch(batch, vocab_size=self.vocab_size)
        return validate_batch(batch, vocab_size=self.vocab_size)

    def logprobs(self, batch) -> np.ndarray:
        """log_softmax(logits / T)[token] of every completion token under the current policy."""
        torch = _torch()
        batch = self._prepare(batch)
        out = np.zeros(len(batch["completion_ids"]), np.float32)
        steps = [s for s in range(len(batch["temperatures"]))
                 if batch["completion_offsets"][s + 1] > batch["completion_offsets"][s]]
        if not steps:
            return out
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                for micro in self._micro_batches(batch, steps):
                    index, logp, _, _ = self._forward_logprobs(self.model, batch, micro, None, False)
                    out[index] = logp.float().cpu().numpy()
        finally:
            self.model.train(was_training)
        return out

    def _reference_logprobs(self, batch, micro, sel):
        torch = _torch()
        with torch.no_grad():
            if self.is_lora:
                with self.model.disable_adapter():
                    return self._forward_logprobs(self.model, batch, micro, sel, False)[1]
            return self._forward_logprobs(self.reference, batch, micro, sel, False)[1]

    def _minibatches(self, batch: dict) -> list[list[int]]:
        """Splits all steps into ``minibatches`` groups of whole trajectories (fewer if there are
        fewer trajectories), keeping trajectory order."""
        steps = list(range(len(batch["temperatures"])))
        k = self.config.minibatches
        if k <= 1 or not steps:
            return [steps]
        owner = batch["step_trajectory"]
        trajectories = np.unique(owner)
        chunks = np.array_split(trajectories, min(k, len(trajectories)))
        chunk_of = {int(t): i for i, chunk in enumerate(chunks) for t in chunk}
        groups: list[list[int]] = [[] for _ in chunks]
        for s in steps:
            groups[chunk_of[int(owner[s])]].append(s)
        return groups

    def learn(self, batch) -> dict:
        """One update on a token batch (path or dict); returns statistics (see ``STATS_DOC``)."""
        torch = _torch()
        cfg = self.config
        started = time.perf_counter()
        batch = self._prepare(batch)
        trained = trained_token_mask(batch, cfg.mask_truncated, cfg.mask_length_limited)
        num_steps = len(batch["temperatures"])
        wanted = int(batch["loss_mask"].sum())
        masked_fraction = 1.0 - int(trained.sum()) / wanted if wanted else 0.0
        if masked_fraction > 0.5:
            log.warning("%.0f%% of this batch's model tokens carry no loss (replies cut at the "
                        "token limit%s): raise max_new_tokens, or set mask_length_limited false",
                        100 * masked_fraction,
                        ", trajectories out of steps" if cfg.mask_truncated else "")
        co = batch["completion_offsets"]
        cumulative = np.concatenate([[0], np.cumsum(trained, dtype=np.int64)])
        step_tokens = cumulative[co[1:]] - cumulative[co[:-1]]  # trained tokens per step
        active = [s for s in range(num_steps) if step_tokens[s] > 0]
        base = {"steps": num_steps, "trajectories": int(len(batch["advantages"])),
                "iteration": batch["metadata"].get("iteration"), "masked_fraction": masked_fraction}
        if not active:
            return {**base, **_empty_stats(), "learn_s": time.perf_counter() - started,
                    "skipped": "no trained tokens", "updated": False}

        advantages = batch["step_advantages"].astype(np.float32)
        token_adv = np.repeat(advantages, np.diff(co))
        if not self.checked_rollouts and cfg.max_initial_log_ratio > 0:
            self._check_rollout_logprobs(batch, trained, active)
        if cfg.kl_coef == 0 and not token_adv[trained].any():
            # No gradient at all, but AdamW's momentum (and weight decay) would still move the
            # weights: no step, nothing to hand back.
            return {**base, **_empty_stats(), "learn_s": time.perf_counter() - started,
                    "skipped": "every advantage is 0", "updated": False}
        rollout = batch["rollout_logprobs"].astype(np.float32)
        sums = {"loss": 0.0, "pg_loss": 0.0}
        token_stats = {"kl": [], "entropy": [], "ratio": [], "clip_low": [], "clip_high": [],
                       "capped": [], "adv": []}
        grad_norms, processed, skipped_steps = [], 0, 0
        lr = cfg.resolved_learning_rate()
        self.model.train()
        # (all steps of the minibatch, the steps with trained tokens); Dr. GRPO's normaliser
        # counts all steps, the other two only what carries loss.
        minibatches = [(m, [s for s in m if step_tokens[s] > 0]) for m in self._minibatches(batch)]
        minibatches = [(m, a) for m, a in minibatches if a]
        for mb_steps_all, minibatch in minibatches:
            mb_tokens = int(sum(step_tokens[s] for s in minibatch))
            self.optimizer.zero_grad(set_to_none=True)
            for micro in self._micro_batches(batch, minibatch):
                index, logp, entropy, n = self._forward_logprobs(self.model, batch, micro, trained, True)
                processed += n
                old = torch.from_numpy(rollout[index]).to(self.device)
                adv = torch.from_numpy(token_adv[index]).to(self.device)
                # Per-token normalisation weights.
                if cfg.normalization == "dr_grpo":
                    weight = torch.full_like(logp, 1.0 / (len(mb_steps_all) * cfg.max_completion_tokens))
                elif cfg.normalization == "token":
                    weight = torch.full_like(logp, 1.0 / mb_tokens)
                else:
                    owner = np.searchsorted(co, index, side="right") - 1
                    per = 1.0 / (step_tokens[owner].astype(np.float64) * len(minibatch))
                    weight = torch.from_numpy(per.astype(np.float32)).to(self.device)
                log_ratio = torch.clamp(logp - old, -MAX_LOG_RATIO, MAX_LOG_RATIO)
                ratio = torch.exp(log_ratio)
                unclipped = ratio
                if cfg.ratio_cap > 0:
                    capped = cfg.ratio_cap * torch.exp(logp - logp.detach())
                    unclipped = torch.where(ratio > cfg.ratio_cap, capped, ratio)
                clipped = torch.clamp(ratio, 1.0 - cfg.clip_low, 1.0 + cfg.clip_high)
                pg = -torch.minimum(unclipped * adv, clipped * adv)
                token_loss = pg
                if cfg.kl_coef > 0:
                    ref = self._reference_logprobs(batch, micro, trained)
                    delta = ref - logp
                    kl = torch.exp(delta) - delta - 1.0
                    token_loss = pg + cfg.kl_coef * kl
                    token_stats["kl"].append(kl.detach().float().cpu().numpy())
                loss = (token_loss * weight).sum()
                loss.backward()
                sums["loss"] += float(loss.detach()) / len(minibatches)
                sums["pg_loss"] += float((pg.detach() * weight).sum()) / len(minibatches)
                r = ratio.detach().float().cpu().numpy()
                a = adv.cpu().numpy()
                token_stats["ratio"].append(r)
                token_stats["adv"].append(a)
                token_stats["entropy"].append(entropy.float().cpu().numpy())
                token_stats["clip_high"].append((a > 0) & (r > 1.0 + cfg.clip_high))
                token_stats["clip_low"].append((a < 0) & (r < 1.0 - cfg.clip_low))
                token_stats["capped"].append((a < 0) & (r > cfg.ratio_cap) if cfg.ratio_cap > 0
                                             else np.zeros_like(r, bool))
            max_norm = cfg.max_grad_norm if cfg.max_grad_norm > 0 else float("inf")
            norm = float(torch.nn.utils.clip_grad_norm_(self.trainable, max_norm))
            grad_norms.append(norm)
            if not math.isfinite(norm):
                log.warning("non-finite gradient norm; optimizer step skipped")
                self.optimizer.zero_grad(set_to_none=True)
                skipped_steps += 1
                continue
            lr = self._scheduled_lr()
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            self.optimizer_steps += 1
        updated = skipped_steps < len(minibatches)
        if updated:
            self.updates += 1
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        elapsed = time.perf_counter() - started
        cat = {k: np.concatenate(v) if v else np.zeros(0) for k, v in token_stats.items()}
        n_tokens = int(trained.sum())
        clip_low = float(cat["clip_low"].mean())
        clip_high = float(cat["clip_high"].mean())
        stats = {
            **base,
            "loss": sums["loss"],
            "pg_loss": sums["pg_loss"],
            "kl": float(cat["kl"].mean()) if cat["kl"].size else 0.0,
            "entropy": float(cat["entropy"].mean()),
            "clip_fraction": clip_low + clip_high,
            "clip_low_fraction": clip_low,
            "clip_high_fraction": clip_high,
            "capped_fraction": float(cat["capped"].mean()),
            "mean_ratio": float(cat["ratio"].mean()),
            "max_ratio": float(cat["ratio"].max()),
            "min_ratio": float(cat["ratio"].min()),
            "grad_norm": float(np.mean(grad_norms)) if grad_norms else 0.0,
            "learner_tokens": n_tokens,
            "processed_tokens": processed,
            "learner_tokens_per_s": processed / elapsed if elapsed > 0 else 0.0,
            "trained_tokens_per_s": n_tokens / elapsed if elapsed > 0 else 0.0,
            "learn_s": elapsed,
            "optimizer_steps": len(minibatches) - skipped_steps,
            "total_optimizer_steps": self.optimizer_steps,
            "learning_rate": lr,
            "mean_advantage": float(cat["adv"].mean()),
            "updated": updated,
        }
        if skipped_steps:
            stats["skipped"] = f"{skipped_steps} optimizer step(s) skipped: non-finite gradient"
        return stats

    def _check_rollout_logprobs(self, batch: dict, trained: np.ndarray, active: list[int]) -> None:
        """Before the first update: the rollout log-probs must be this policy's (see the module
        docs). Scores up to two micro batches without gradient; raises ``BatchError`` when the
        mean |log-ratio| exceeds ``max_initial_log_ratio``."""
        torch = _torch()
        limit = self.config.max_initial_log_ratio
        rollout = batch["rollout_logprobs"]
        # The same tokens scored as the model's own distribution (temperature 1, no truncation),
        # to recognise rollout log-probs reported at temperature 1.
        plain = {**batch, "temperatures": np.ones_like(batch["temperatures"]),
                 "top_k": np.zeros_like(batch["top_k"]), "top_p": np.ones_like(batch["top_p"])}
        tempered = bool((np.abs(batch["temperatures"][active] - 1.0) > 1e-4).any())
        diffs, plain_diffs = [], []
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                for micro in self._micro_batches(batch, active)[:2]:
                    index, logp, _, _ = self._forward_logprobs(self.model, batch, micro, trained, False)
                    diffs.append(np.abs(logp.float().cpu().numpy() - rollout[index]))
                    if tempered:
                        index, logp, _, _ = self._forward_logprobs(self.model, plain, micro, trained,
                                                                   False)
                        plain_diffs.append(np.abs(logp.float().cpu().numpy() - rollout[index]))
        finally:
            self.model.train(was_training)
        self.checked_rollouts = True
        diff = np.concatenate(diffs)
        mean = float(diff.mean()) if diff.size else 0.0
        plain_mean = float(np.concatenate(plain_diffs).mean()) if plain_diffs else float("inf")
        # Temperature-1 log-probs while sampling at another temperature: they fit the model's
        # own distribution far better than the sampled one, even where the mean stays small.
        at_temperature_one = mean > 0.02 and plain_mean < mean / 4
        if mean <= limit and not at_temperature_one:
            return
        hints = []
        if at_temperature_one:
            hints.append(f"they match temperature 1 (mean |log-ratio| {plain_mean:.4f} there): a "
                         "rollout server that reports temperature-1 log-probs while sampling at "
                         "another temperature")
        if (batch["top_p"] < 1).any() or (batch["top_k"] > 0).any():
            hints.append("log-probs of the distribution before top-k / top-p truncation")
        hints.append("rollouts from other weights than the learner's")
        raise BatchError(
            f"the rollout log-probs are not this policy's: mean |log-ratio| {mean:.3f} over "
            f"{diff.size} tokens before any update (at most {limit} expected; "
            f"max_initial_log_ratio sets it, 0 disables the check). Likely causes: "
            + "; ".join(hints))

    def _scheduled_lr(self) -> float:
        lr = self.config.resolved_learning_rate()
        if self.config.warmup_steps > 0:
            lr *= min(1.0, (self.optimizer_steps + 1) / self.config.warmup_steps)
        return lr

    # -- weights and export ------------------------------------------------------------------------

    def state_tensors(self) -> dict[str, np.ndarray]:
        """Current weights under Hugging Face names, float32, LoRA merged (the model is unchanged).

        With tied word embeddings ``lm_head.weight`` is left out, as in HF checkpoint files."""
        torch = _torch()
        base = self._base_model()
        with torch.no_grad():
            state = base.state_dict()
            out: dict[str, np.ndarray] = {}
            deltas: dict[str, Any] = {}
            if self.is_lora:
                from peft.tuners.lora import LoraLayer

                for name, module in base.named_modules():
                    if isinstance(module, LoraLayer) and hasattr(module, "get_delta_weight"):
                        for adapter in module.active_adapters:
                            if adapter in module.lora_A:
                                delta = module.get_delta_weight(adapter)
                                key = f"{name}.weight"
                                deltas[key] = deltas[key] + delta if key in deltas else delta
            for key, tensor in state.items():
                if "lora_" in key:
                    continue
                key = key.replace(".base_layer.", ".")
                value = tensor.detach().float()
                if key in deltas:
                    value = value + deltas[key].float()
                out[key] = value.cpu().numpy().copy()
            if getattr(base.config, "tie_word_embeddings", False):
                out.pop("lm_head.weight", None)
        return out

    def hf_config(self) -> dict:
        config = json.loads(self._base_model().config.to_json_string(use_diff=False))
        config["dtype"] = "float32"
        config.pop("torch_dtype", None)
        config["use_cache"] = True
        return config

    def save_hf(self, out_dir) -> Path:
        """Writes config.json, model.safetensors and the source folder's tokenizer files."""
        from safetensors.numpy import save_file

        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        config = json.dumps(self.hf_config(), indent=2, sort_keys=True) + "\n"
        _atomic_write_text(out_dir / "config.json", config)
        tmp = out_dir / f".model.safetensors.tmp{os.getpid()}"
        save_file(self.state_tensors(), str(tmp), metadata={"format": "pt"})
        os.replace(tmp, out_dir / "model.safetensors")
        for name in TOKENIZER_FILES:
            source = self.model_dir / name
            if source.is_file() and source.resolve() != (out_dir / name).resolve():
                shutil.copy2(source, out_dir / name)
        return out_dir

    def export_onnx(self, out_dir, precisions=("fp32",), write_safetensors: bool = True) -> float:
        """Hands the current weights (``state_tensors``) to ``frognano_models.export_onnx``, in
        process, which writes ``out_dir/<precision>`` model folders; returns the seconds taken.
        The converter's summary is kept in ``last_export``."""
        started = time.perf_counter()
        module = _load_converter(self.config.converter)
        export = getattr(module, "export_onnx", None)
        if export is None:
            raise ModelError(f"the converter {getattr(module, '__file__', module)} has no export_onnx")
        has_tokenizer = all((self.model_dir / n).is_file()
                            for n in ("tokenizer.json", "tokenizer_config.json"))
        kwargs = {"config": self.hf_config(), "tensors": self.state_tensors(), "out_dir": Path(out_dir),
                  "precisions": list(precisions),
                  "tokenizer_from": self.model_dir if has_tokenizer else None,
                  "write_safetensors": write_safetensors,
                  "source": {"source": "torch_learner", "base_model": self.model_dir.name,
                             "optimizer_steps": self.optimizer_steps, "lora_rank": self.config.lora_rank}}
        try:
            accepted = inspect.signature(export).parameters
            if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values()):
                kwargs = {k: v for k, v in kwargs.items() if k in accepted}
        except (TypeError, ValueError):
            pass
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        try:
            self.last_export = export(**kwargs)
        except LearnerError:
            raise
        except Exception as error:
            raise ModelError(f"ONNX export failed: {_one_line(error)}") from error
        return time.perf_counter() - started

    # -- checkpoints ---------------------------------------------------------------------------------

    def _trainable_state(self) -> dict:
        if self.is_lora:
            return {n: p.detach().clone() for n, p in self.model.named_parameters() if p.requires_grad}
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def save_checkpoint(self, path) -> Path:
        """Weights (all of them; with LoRA the adapter only, the base is the model folder's),
        optimizer state, RNG states and step counts, written atomically."""
        torch = _torch()
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        np_state = np.random.get_state()
        payload = {
            "format": CHECKPOINT_FORMAT,
            "version": CHECKPOINT_VERSION,
            "lora_rank": self.config.lora_rank,
            "config": json.dumps(self.config.to_dict()),
            "weights": self._trainable_state(),
            "optimizer": self.optimizer.state_dict(),
            "optimizer_steps": self.optimizer_steps,
            "updates": self.updates,
            "rng_torch": torch.get_rng_state(),
            "rng_cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "rng_numpy": [np_state[0], torch.from_numpy(np_state[1].astype(np.int64)), int(np_state[2]),
                          int(np_state[3]), float(np_state[4])],
            "rng_python": json.dumps(random.getstate()),
        }
        tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
        try:
            torch.save(payload, str(tmp))
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                tmp.unlink()
        return path

    def load_checkpoint(self, path) -> None:
        torch = _torch()
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"checkpoint {path} does not exist")
        try:
            payload = torch.load(str(path), map_location=self.device, weights_only=True)
        except Exception as error:
            raise ModelError(f"cannot read checkpoint {path}: {_one_line(error)}") from error
        if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
            raise ModelError(f"{path} is not a learner checkpoint")
        if payload.get("lora_rank") != self.config.lora_rank:
            raise ConfigError(f"checkpoint {path} has lora_rank {payload.get('lora_rank')}, this "
                              f"learner {self.config.lora_rank}")
        weights = payload["weights"]
        with torch.no_grad():
            if self.is_lora:
                params = dict(self.model.named_parameters())
                missing = [n for n, p in params.items() if p.requires_grad and n not in weights]
                if missing:
                    raise ModelError(f"checkpoint {path} lacks adapter weights such as {missing[0]}")
                for name, value in weights.items():
                    params[name].copy_(value)
            else:
                self.model.load_state_dict(weights, strict=True)
        self.optimizer.load_state_dict(payload["optimizer"])
        self.optimizer_steps = int(payload["optimizer_steps"])
        self.updates = int(payload["updates"])
        torch.set_rng_state(payload["rng_torch"].cpu())
        if payload["rng_cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all([s.cpu() for s in payload["rng_cuda"]])
        kind, keys, pos, has_gauss, cached = payload["rng_numpy"]
        np.random.set_state((kind, keys.cpu().numpy().astype(np.uint32), pos, has_gauss, cached))
        state = json.loads(payload["rng_python"])
        random.setstate((state[0], tuple(state[1]), state[2]))


def _empty_stats() -> dict:
    return {"loss": 0.0, "pg_loss": 0.0, "kl": 0.0, "entropy": 0.0, "clip_fraction": 0.0,
            "clip_low_fraction": 0.0, "clip_high_fraction": 0.0, "capped_fraction": 0.0,
            "mean_ratio": 1.0, "max_ratio": 1.0, "min_ratio": 1.0, "grad_norm": 0.0,
            "learner_tokens": 0, "processed_tokens": 0, "learner_tokens_per_s": 0.0,
            "trained_tokens_per_s": 0.0, "optimizer_steps": 0, "mean_advantage": 0.0}


STATS_DOC = """learn() statistics:
  loss, pg_loss      the normalised objective (with / without the KL term), mean over minibatches
  kl                 mean k3 KL to the initial policy over trained tokens (0 when kl_coef = 0)
  entropy            mean entropy of log_softmax(logits / T) over trained tokens
  clip_fraction      share of trained tokens whose gradient the clip removed (= low + high)
  clip_low_fraction  A < 0 and ratio < 1 - clip_low;  clip_high_fraction: A > 0 and ratio > 1 + clip_high
  capped_fraction    A < 0 and ratio > ratio_cap (gradient truncated, not removed)
  mean_ratio, max_ratio, min_ratio   exp(logp - rollout_logp) over trained tokens, as each
                     minibatch saw them (with one minibatch: before the update)
  grad_norm          gradient norm before clipping (mean over minibatches)
  learner_tokens     trained tokens;  processed_tokens: input positions run forward and backward
                     (prompt and completion, no padding)
  learner_tokens_per_s  processed_tokens / learn_s;  trained_tokens_per_s: learner_tokens / learn_s
  learn_s            wall time of the update (validation included);  steps: rows in the batch
  updated            whether the weights changed (false: nothing to train on, every advantage 0,
                     or every optimizer step skipped); a caller hands weights back only then
  skipped            why some or all optimizer steps were skipped (absent when none was)
  masked_fraction    share of loss_mask tokens left out by mask_length_limited / mask_truncated
"""


def _disable_dropout(model) -> None:
    """Turns dropout off in the policy so the learner scores tokens as the rollout engine did."""
    torch = _torch()
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        for attribute in ("attention_dropout", "dropout", "hidden_dropout"):
            if isinstance(getattr(module, attribute, None), float):
                setattr(module, attribute, 0.0)


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= 500 else text[:497] + "..."


def _load_converter(path: str | None):
    """Finds the ``frognano_models`` module: the given path, $FROGNANO_CONVERTER, an importable
    module, or the repository's llm/python folder next to this package."""
    candidates = [p for p in (path, os.environ.get(CONVERTER_ENV)) if p]
    for candidate in candidates:
        candidate = Path(candidate)
        file = candidate / "frognano_models.py" if candidate.is_dir() else candidate
        if not file.is_file():
            raise ModelError(f"converter {file} does not exist")
        loaded = sys.modules.get("frognano_models")
        if loaded is not None and Path(getattr(loaded, "__file__", "")).resolve() == file.resolve():
            return loaded
        spec = importlib.util.spec_from_file_location("frognano_models", file)
        module = importlib.util.module_from_spec(spec)
        sys.modules["frognano_models"] = module  # dataclasses look their module up while defining
        try:
            spec.loader.exec_module(module)
        except Exception as error:
            sys.modules.pop("frognano_models", None)
            raise ModelError(f"cannot import the converter {file}: {_one_line(error)}") from error
        return module
    try:
        return importlib.import_module("frognano_models")
    except ImportError:
        pass
    here = Path(__file__).resolve()
    for parent in here.parents:
        file = parent / "llm" / "python" / "frognano_models.py"
        if file.is_file():
            return _load_converter(str(file))
    raise ModelError("frognano_models is not importable; set the learner config 'converter' or "
                     f"${CONVERTER_ENV} to the path of frognano_models.py")


# ----------------------------------------------------------------------------------------------
# serve / CLI
# ----------------------------------------------------------------------------------------------

def _error_kind(error: BaseException) -> str:
    if isinstance(error, LearnerError):
        return error.kind
    if isinstance(error, OSError):
        return "io"
    return "internal"


class Server:
    """The JSON-lines protocol (see the module docs)."""

    def __init__(self):
        self.learner: TorchLearner | None = None

    def _need(self) -> TorchLearner:
        if self.learner is None:
            raise LearnerError("no model loaded: send an init request first")
        return self.learner

    @staticmethod
    def _field(request: dict, name: str, kind=str):
        if name not in request:
            raise LearnerError(f"bad request: op {request.get('op')!r} needs the field {name!r}")
        value = request[name]
        if not isinstance(value, kind):
            raise LearnerError(f"bad request: field {name!r} must be a {kind.__name__}")
        return value

    def handle(self, request) -> dict:
        if not isinstance(request, dict):
            raise LearnerError("bad request: expected a JSON object")
        op = request.get("op")
        if op == "init":
            config = request.get("config") or {}
            if not isinstance(config, dict):
                raise ConfigError("config must be a JSON object")
            config = LearnerConfig.from_dict(config)
            self.learner = None
            self.learner = TorchLearner(self._field(request, "model"), config)
            return {"ok": True, "device": str(self.learner.device),
                    "parameters": self.learner.parameter_count(),
                    "trainable": self.learner.trainable_count()}
        if op == "learn":
            return {"ok": True, "stats": self._need().learn(self._field(request, "batch"))}
        if op == "logprobs":
            from safetensors.numpy import save_file

            learner = self._need()
            logprobs = learner.logprobs(self._field(request, "batch"))
            out = Path(self._field(request, "out"))
            tmp = out.with_name(f".{out.name}.tmp{os.getpid()}")
            save_file({"logprobs": logprobs}, str(tmp))
            os.replace(tmp, out)
            return {"ok": True}
        if op == "export_onnx":
            precisions = request.get("precisions", ["fp32"])
            if not isinstance(precisions, list) or not all(isinstance(p, str) for p in precisions):
                raise LearnerError("bad request: precisions must be a list of strings")
            write_safetensors = request.get("write_safetensors", True)
            if not isinstance(write_safetensors, bool):
                raise LearnerError("bad request: write_safetensors must be true or false")
            learner = self._need()
            seconds = learner.export_onnx(self._field(request, "dir"), precisions, write_safetensors)
            reply = {"ok": True, "seconds": seconds}
            if isinstance(learner.last_export, dict) and "folders" in learner.last_export:
                reply["folders"] = learner.last_export["folders"]
            return reply
        if op == "save_hf":
            self._need().save_hf(self._field(request, "dir"))
            return {"ok": True}
        if op == "save":
            self._need().save_checkpoint(self._field(request, "path"))
            return {"ok": True}
        if op == "load":
            self._need().load_checkpoint(self._field(request, "path"))
            return {"ok": True}
        if op == "shutdown":
            return {"ok": True}
        raise LearnerError(f"bad request: unknown op {op!r}")

    def serve(self, stdin, stdout) -> int:
        for line in stdin:
            line = line.strip()
            if not line:
                continue
            op = None
            try:
                request = json.loads(line)
                op = request.get("op") if isinstance(request, dict) else None
                reply = self.handle(request)
            except json.JSONDecodeError as error:
                reply = {"ok": False, "error": f"bad request: not JSON ({error})", "kind": "internal"}
            except Exception as error:  # a bad request must never end the server
                if not isinstance(error, (LearnerError, OSError)):
                    log.exception("request %r failed", op)
                reply = {"ok": False, "error": _one_line(error), "kind": _error_kind(error)}
            stdout.write(json.dumps(_sanitize(reply)) + "\n")
            stdout.flush()
            if op == "shutdown" and reply.get("ok"):
                return 0
        return 0


def _sanitize(value):
    """Non-finite floats become null (JSON has no NaN)."""
    if isinstance(value, dict):
        return {k: _sanitize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_sanitize(v) for v in value]
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, Path):
        return str(value)
    return value


def _parse_config_arg(text: str | None) -> dict:
    if not text:
        return {}
    path = Path(text)
    try:
        source = path.read_text() if not text.lstrip().startswith("{") and path.is_file() else text
        config = json.loads(source)
    except (ValueError, OSError) as error:
        raise ConfigError(f"--config is neither a JSON object nor a JSON file: {error}") from error
    if not isinstance(config, dict):
        raise ConfigError("--config must be a JSON object")
    return config


# ----------------------------------------------------------------------------------------------
# A learning OnnxPolicy for frognano.GrpoTrainer (needs the compiled frognano package)
# ----------------------------------------------------------------------------------------------

class LearningOnnxPolicy:
    """An ``frognano.OnnxPolicy`` that learns with a ``TorchLearner``: a drop-in policy for
    ``frognano.GrpoTrainer`` (any object with act/learn/state/load_state is one).

    ``act`` rolls out in ONNX Runtime; ``learn(batch)`` turns the trainer's batch into token
    arrays (``frognano.token_batch``: the exact prompt ids, generated ids, rollout log-probs and
    loss masks), takes one update, exports the new weights as an fp32 ONNX folder under
    ``work_dir`` and reloads the policy on it (the hand-back; ``handback_s`` in the stats).
    ``state``/``load_state`` write and restore learner checkpoints (weights, optimizer, RNG).

    ``model``: an fp32 model folder with ``model.safetensors`` (what ``frognano.fetch_model``
    writes, e.g. ``frognano.fetch_model("smollm2-135m:fp32")``, or the converter's ``from-hf``
    output). ``learner``: ``LearnerConfig`` settings. Other keyword arguments go to
    ``frognano.OnnxPolicy`` (generation, system_prompt, max_prompt_tokens, ...). Rollouts sample
    at temperature 1 unless ``generation`` says otherwise; greedy rollouts are refused (every
    rollout of a group would be the same, and nothing would be learned).
    """

    def __init__(self, model, learner: dict | LearnerConfig | None = None, *, work_dir=None,
                 **policy_options):
        import tempfile

        import frognano

        self.start = Path(model)
        if not (self.start / "model.safetensors").is_file():
            raise ModelError(f"{self.start} holds no model.safetensors (train an fp32 model folder)")
        config = learner if isinstance(learner, LearnerConfig) else LearnerConfig.from_dict(learner)
        if config.converter is None:
            config = dataclasses.replace(config, converter=frognano._frognano._converter_script())
        self._frognano = frognano
        generation = {"temperature": 1.0, **dict(policy_options.pop("generation", None) or {})}
        temperature = generation.get("temperature")
        if isinstance(temperature, (int, float)) and temperature <= GREEDY_TEMPERATURE:
            raise ConfigError("greedy training rollouts (temperature 0) make every rollout of a "
                              "group the same: every group has equal rewards and nothing is "
                              "learned; sample them (temperature 1 is the default)")
        self.policy = frognano.OnnxPolicy(str(self.start), generation=generation, **policy_options)
        self.learner = TorchLearner(self.start, config)
        self.work_dir = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="frognano-llm-"))
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.updates = 0
        self.weights = self.start

    def act(self, contexts):
        return self.policy.act(contexts)

    def _hand_back(self) -> float:
        started = time.perf_counter()
        out = self.work_dir / "weights" / f"update-{self.updates:05d}"
        if out.exists():
            shutil.rmtree(out)
        self.learner.export_onnx(out, precisions=("fp32",))
        folder = out / "fp32" if (out / "fp32").is_dir() else out
        self.policy.reload(str(folder))
        previous, self.weights = self.weights, folder
        if previous != self.start and previous.parent.parent == self.work_dir / "weights":
            shutil.rmtree(previous.parent, ignore_errors=True)
        return time.perf_counter() - started

    def learn(self, batch) -> dict:
        arrays = self._frognano.token_batch(batch)
        stats = self.learner.learn(arrays)
        if stats.get("updated"):
            self.updates += 1
            stats["handback_s"] = self._hand_back()
        stats["updates"] = self.updates
        return stats

    def state(self) -> dict:
        path = self.work_dir / "checkpoints" / f"learner-{self.updates:05d}.pt"
        self.learner.save_checkpoint(path)
        return {"kind": "language-model", "updates": self.updates, "learner_checkpoint": str(path)}

    def load_state(self, state: dict) -> None:
        if not isinstance(state, dict) or state.get("kind") != "language-model":
            raise ConfigError("not a language-model policy state")
        self.learner.load_checkpoint(state["learner_checkpoint"])
        self.updates = int(state["updates"])
        if self.updates:
            self._hand_back()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    learn = sub.add_parser("learn", help="one update on a saved token batch; prints stats JSON")
    learn.add_argument("--model", required=True, help="Hugging Face model folder")
    learn.add_argument("--batch", required=True, help="token batch file (safetensors)")
    learn.add_argument("--config", help="learner config: a JSON object or a JSON file")
    learn.add_argument("--out", help="write the updated model here (Hugging Face folder)")
    sub.add_parser("serve", help="JSON-lines protocol on stdin/stdout")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s torch_learner %(levelname)s %(message)s")
    if args.command == "serve":
        # The protocol owns the real stdout; anything else printing to fd 1 lands on stderr.
        protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
        sys.stdout.flush()
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
        sys.stdout = sys.stderr
        return Server().serve(sys.stdin, protocol)
    try:
        config = LearnerConfig.from_dict(_parse_config_arg(args.config))
        batch = load_batch(args.batch)  # fail fast, before torch is imported
        learner = TorchLearner(args.model, config)
        stats = learner.learn(batch)
        if args.out:
            learner.save_hf(args.out)
            stats["out"] = args.out
    except (LearnerError, OSError) as error:
        print(json.dumps({"ok": False, "error": _one_line(error), "kind": _error_kind(error)}))
        return 1
    print(json.dumps(_sanitize(stats)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
