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

Modules
-------
This file is the entry point: the command line (``main``) and, re-exported, every name of the
learner's parts, the ``_learner_*.py`` modules beside it: ``_learner_common`` (logger, errors),
``_learner_batch`` (token batches), ``_learner_config`` (``LearnerConfig``),
``_learner_objective`` (log-probs and ``learn``), ``_learner_weights`` (``state_tensors``,
``save_hf``, ``export_onnx``, checkpoints, finding the converter), ``_learner_model``
(``TorchLearner``) and ``_learner_serve`` (the serve protocol). In the installed package they
are ``frognano._learner_*``, and ``LearningOnnxPolicy`` is ``frognano.LanguageModelPolicy``
(the training job's learning policy, which runs this learner in a child process). Run as a
script (the Rust trainer writes all of them into one folder in its cache) or loaded by file path,
this file has no package and they are top-level modules of its folder.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
from pathlib import Path

MODULE_DIR = Path(__file__).resolve().parent

# Without a package (run as a script: the folder is sys.path[0] already; loaded by file path, as
# the tests do: it is not) the parts are imported as top-level modules of this file's folder. It
# goes last on sys.path, so that no other file of the package folder shadows an installed module.
if not __package__ and str(MODULE_DIR) not in sys.path:
    sys.path.append(str(MODULE_DIR))

# The parts, and the names this module re-exports from each (its public surface and what the
# tests reach through it): imported relatively inside the package (frognano.torch_learner), as
# top-level modules beside this file otherwise.
_PARTS = {
    "_learner_batch": (
        "BATCH_FORMAT", "BATCH_TENSORS", "BATCH_VERSION", "GREEDY_TEMPERATURE", "MAX_LOGPROB",
        "OPTIONAL_STEP_TENSORS", "build_batch", "load_batch", "trained_token_mask",
        "validate_batch", "write_batch"),
    "_learner_common": (
        "BatchError", "ConfigError", "LearnerError", "ModelError", "_atomic_write_text",
        "_one_line", "_torch", "log"),
    "_learner_config": ("DEFAULT_TARGET_MODULES", "NORMALIZATIONS", "LearnerConfig"),
    "_learner_model": ("TorchLearner", "_disable_dropout", "seed_everything"),
    "_learner_objective": ("MAX_LOG_RATIO", "STATS_DOC", "_empty_stats", "_truncate_logits"),
    "_learner_serve": ("Server", "_error_kind", "_parse_config_arg", "_sanitize"),
    "_learner_weights": (
        "CHECKPOINT_FORMAT", "CHECKPOINT_VERSION", "CONVERTER_ENV", "TOKENIZER_FILES",
        "_load_converter"),
}
for _module, _names in _PARTS.items():
    _part = importlib.import_module(f".{_module}", __package__) if __package__ else importlib.import_module(_module)
    globals().update({name: getattr(_part, name) for name in _names})
del _module, _names, _part

if __package__:
    # The drop-in learning policy of GrpoTrainer has one home, the compiled package's.
    from ._frognano import LanguageModelPolicy as LearningOnnxPolicy  # noqa: E402,F401

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
