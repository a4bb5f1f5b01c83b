"""`check` and `generate`: running a converted ONNX decoder with onnxruntime and comparing it with
the numpy references, within the tolerances below (part of the converter, frognano_models.py)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from frognano_models_common import _first_id, log
from frognano_models_reference import ReferenceHF, ReferenceLlama
from frognano_models_tokenizer import ByteLevelBpeTokenizer, render_chatml


# Tolerances used by `check`. Measured values (SmolLM2-135M-Instruct Q4_1 / `tiny`, default
# check prompts) are in brackets.
# * fp32 ONNX vs the float64 numpy reference: max |diff| <= FP32_REL_TOL * logit_scale, where
#   logit_scale = max(1, max |reference logit|) [7.1e-5 of 44 / 2.3e-5 of 15; argmax 100%].
#   Same weights, so only float32 rounding differs.
# * Consistency of one model with itself (KV-cached decoding vs full recomputation, left-padded
#   batch vs single rows): fp32 max |diff| <= CONSISTENCY_REL_TOL * logit_scale [7.3e-5 / 1.3e-5].
#   int4 uses INT4_CONSISTENCY_REL_TOL and needs argmax agreement >= INT4_MIN_CONSISTENCY_ARGMAX
#   [gguf: 1.29 of 44, argmax 0.97 / 8e-6; rtn: 1.33, argmax 0.97 / 8e-6]: with accuracy_level 4,
#   MatMulNBits quantizes activations to int8 along different kernel paths for one row and for
#   many, so the logits of a token depend a little on how it was batched.
# * int4 vs the reference, per int4 method (INT4_TOLERANCES): top-1 agreement >= min_argmax, the
#   int4 argmax within the reference's top 5 at >= min_top5 of the positions, and
#   max |diff| <= rel_tol * logit_scale.
#   - "gguf" keeps the GGUF's weights exactly; only the int8 activations differ (as in llama.cpp,
#     which is as far from the reference) [argmax 0.97 / 0.96, top-5 1.0 / 1.0,
#     max |diff| 0.042 / 0.034 of logit_scale].
#   - "rtn" re-rounds: MatMulNBits' integer zero points cannot hold Q4_1's float block minimum, so
#     every 32-weight block moves by up to half a step (RMS 0.29 step, a second 4-bit rounding),
#     and the Q8_0 lm-head drops to 4 bits [argmax 0.57 / 0.56, top-5 0.91 / 0.87,
#     max |diff| 0.54 / 0.40 of logit_scale]. A broken graph scores near 0 on both.
# * The genai layout is held to the same tolerances [fp32: vs reference 9.0e-5 / 1.8e-5, cached
#   5.7e-5 / 1.6e-5, chunked 6.1e-5 / 1.4e-5, equal-length batch 0; int4 gguf: vs reference
#   1.96 (argmax 0.996) / 0.51 (0.963), cached 1.65 / 0.13, chunked 1.11 / 0.13, batch 0].
FP32_REL_TOL = 1e-3
CONSISTENCY_REL_TOL = 1e-3
INT4_CONSISTENCY_REL_TOL = 0.08
INT4_MIN_CONSISTENCY_ARGMAX = 0.90
INT4_TOLERANCES = {
    "gguf": {"rel_tol": 0.10, "min_argmax": 0.85, "min_top5": 0.97},
    "rtn": {"rel_tol": 0.75, "min_argmax": 0.45, "min_top5": 0.80},
}

DEFAULT_CHECK_SYSTEM = "You are a helpful AI assistant."
DEFAULT_CHECK_PROMPTS = (
    ("chat", "Write a Python function that reverses a string."),
    ("text", "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + "),
    ("text", "The quick brown fox jumps over 13 lazy dogs."),
)


# ----------------------------------------------------------------------------------------------
# Running the ONNX decoder
# ----------------------------------------------------------------------------------------------


class OnnxDecoder:
    """Thin onnxruntime wrapper over a converted model folder."""

    def __init__(self, model_dir: Path):
        import onnxruntime as ort  # noqa: PLC0415

        self.config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        options = ort.SessionOptions()
        options.log_severity_level = 3
        self.session = ort.InferenceSession(str(model_dir / "model.onnx"), options,
                                            providers=["CPUExecutionProvider"])
        self.layers = self.config["num_hidden_layers"]
        self.kv_heads = self.config["num_key_value_heads"]
        self.head_dim = self.config["head_dim"]
        self.output_names = [o.name for o in self.session.get_outputs()]
        # The genai layout (GroupQueryAttention) has no position_ids: rotary positions follow from
        # the attention mask, so its rows must not be left-padded.
        self.has_position_ids = any(i.name == "position_ids" for i in self.session.get_inputs())
        self.layout = self.config.get("frognano", {}).get("layout", "optimum")

    def empty_past(self, batch: int) -> dict[str, np.ndarray]:
        empty = np.zeros((batch, self.kv_heads, 0, self.head_dim), dtype=np.float32)
        return {f"past_key_values.{i}.{kind}": empty
                for i in range(self.layers) for kind in ("key", "value")}

    def step(self, input_ids: np.ndarray, attention_mask: np.ndarray,
             past: dict[str, np.ndarray]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """One forward call; attention_mask covers past + new tokens. Returns (logits, next past)."""
        feeds = {"input_ids": input_ids.astype(np.int64), "attention_mask": attention_mask.astype(np.int64),
                 **past}
        if self.has_position_ids:
            positions = np.maximum(np.cumsum(attention_mask, axis=1) - 1, 0)[:, -input_ids.shape[1]:]
            feeds["position_ids"] = positions.astype(np.int64)
        outputs = dict(zip(self.output_names, self.session.run(self.output_names, feeds), strict=True))
        next_past = {name.replace("present.", "past_key_values.", 1): value
                     for name, value in outputs.items() if name.startswith("present.")}
        return outputs["logits"], next_past

    def full(self, row: list[int]) -> np.ndarray:
        """Logits [seq, vocab] of one unpadded row in a single call."""
        ids = np.asarray([row], dtype=np.int64)
        logits, _ = self.step(ids, np.ones_like(ids), self.empty_past(1))
        return logits[0]


def left_pad(rows: list[list[int]], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    width = max(len(r) for r in rows)
    ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for index, row in enumerate(rows):
        ids[index, width - len(row):] = row
        mask[index, width - len(row):] = 1
    return ids, mask


def greedy_generate(decoder: OnnxDecoder, prompt_ids: list[int], max_new: int,
                    stop_ids: set[int]) -> list[int]:
    ids = np.asarray([prompt_ids], dtype=np.int64)
    mask = np.ones_like(ids)
    logits, past = decoder.step(ids, mask, decoder.empty_past(1))
    generated: list[int] = []
    while len(generated) < max_new:
        token = int(np.argmax(logits[0, -1]))
        generated.append(token)
        if token in stop_ids:
            break
        mask = np.concatenate([mask, np.ones((1, 1), dtype=np.int64)], axis=1)
        logits, past = decoder.step(np.asarray([[token]], dtype=np.int64), mask, past)
    return generated


# ----------------------------------------------------------------------------------------------
# check
# ----------------------------------------------------------------------------------------------


@dataclass
class Comparison:
    """Accumulates max |diff| and top-1 / top-5 agreement of logits against an expectation."""

    max_abs_diff: float = 0.0
    positions: int = 0
    argmax_agree: int = 0
    top5_agree: int = 0

    def add(self, actual: np.ndarray, expected: np.ndarray) -> None:
        actual, expected = actual.reshape(-1, actual.shape[-1]), expected.reshape(-1, expected.shape[-1])
        self.max_abs_diff = max(self.max_abs_diff, float(np.max(np.abs(actual - expected))))
        predicted = np.argmax(actual, axis=-1)
        self.argmax_agree += int(np.sum(predicted == np.argmax(expected, axis=-1)))
        top5 = np.argpartition(-expected, 5, axis=-1)[:, :5]
        self.top5_agree += int(np.sum(np.any(top5 == predicted[:, None], axis=-1)))
        self.positions += actual.shape[0]

    def summary(self) -> dict:
        return {"max_abs_diff": round(self.max_abs_diff, 6), "positions": self.positions,
                "argmax_agreement": round(self.argmax_agree / max(self.positions, 1), 4),
                "top5_agreement": round(self.top5_agree / max(self.positions, 1), 4)}


def default_check_rows(tokenizer: ByteLevelBpeTokenizer) -> list[list[int]]:
    rows = []
    for kind, prompt in DEFAULT_CHECK_PROMPTS:
        text = (render_chatml([{"role": "system", "content": DEFAULT_CHECK_SYSTEM},
                               {"role": "user", "content": prompt}]) if kind == "chat" else prompt)
        rows.append(tokenizer.encode(text))
    return rows


def _decode_rest(decoder: OnnxDecoder, ids: np.ndarray, start: int, past,
                 logits: list) -> np.ndarray:
    """The prefill `logits` followed by those of decoding ids[:, start:] one token at a time
    on top of `past` (present.* fed back as past), as one array."""
    for position in range(start, ids.shape[1]):
        step, past = decoder.step(ids[:, position:position + 1],
                                  np.ones((1, position + 1), dtype=np.int64), past)
        logits.append(step[0])
    return np.concatenate(logits, axis=0)


def _check_rows(model_dir: Path, vocab_size: int) -> list[list[int]]:
    """The built-in check prompts through the folder's tokenizer; fixed pseudo-random ids when
    the small byte-level BPE tokenizer cannot read it (other tokenizer families)."""
    try:
        return default_check_rows(ByteLevelBpeTokenizer.from_file(model_dir / "tokenizer.json"))
    except (KeyError, ValueError, TypeError) as error:
        log(f"cannot encode the check prompts with the built-in tokenizer ({type(error).__name__}); "
            "using fixed pseudo-random token ids")
        rng = np.random.default_rng(0)
        return [rng.integers(0, vocab_size, size=length).tolist() for length in (29, 17, 8)]


def run_check(gguf_path: Path | None, model_dir: Path, rows: list[list[int]] | None,
              decode_steps: int, checkpoint: Path | None = None) -> dict:
    """Compares the ONNX model in model_dir with the numpy reference over the GGUF's weights
    (ReferenceLlama), or over a HF checkpoint's (ReferenceHF, when checkpoint is given); see the
    tolerances above."""
    started = time.perf_counter()
    decoder = OnnxDecoder(model_dir)
    precision = decoder.config.get("frognano", {}).get("precision", "fp32")
    pad_id = _first_id(decoder.config.get("pad_token_id", decoder.config.get("eos_token_id"))) or 0
    if rows is None:
        rows = _check_rows(model_dir, int(decoder.config["vocab_size"]))
    log(f"checking {model_dir} ({precision}) on {len(rows)} rows of lengths {[len(r) for r in rows]}")
    reference = ReferenceHF(checkpoint) if checkpoint is not None else ReferenceLlama(gguf_path)

    vs_reference = Comparison()      # every ONNX logit we compute, against the reference
    cached_vs_full = Comparison()    # KV-cached decoding against full recomputation (ONNX)
    padded_vs_single = Comparison()  # left-padded batch against single rows (ONNX)
    # Graphs without position_ids (genai layout, GroupQueryAttention) instead: prefill in two
    # chunks (the second one on top of a non-empty past) and an equal-length batch of two rows.
    chunked_vs_full = Comparison()
    equal_batch_vs_single = Comparison()
    single_logits, reference_logits = [], []
    logit_scale = 1.0

    for row in rows:
        expected = reference.logits([row])[0]
        logit_scale = max(logit_scale, float(np.max(np.abs(expected))))
        full = decoder.full(row)
        vs_reference.add(full, expected)
        single_logits.append(full)
        reference_logits.append(expected)
        # Prefill the first half, then one token at a time, feeding present.* back as past.
        split = max(1, len(row) // 2)
        ids = np.asarray([row], dtype=np.int64)
        logits, past = decoder.step(ids[:, :split], np.ones((1, split), dtype=np.int64),
                                    decoder.empty_past(1))
        cached = _decode_rest(decoder, ids, split, past, [logits[0]])
        cached_vs_full.add(cached, full)
        vs_reference.add(cached, expected)
        if not decoder.has_position_ids:
            # Prefill a third, then the next third as one chunk on top of that past (a
            # "subsequent prompt" for GroupQueryAttention), then one token at a time.
            first, second = max(1, len(row) // 3), max(1, len(row) // 3) + max(1, len(row) // 3)
            second = min(second, len(row))
            logits, past = decoder.step(ids[:, :first], np.ones((1, first), dtype=np.int64),
                                        decoder.empty_past(1))
            chunked = [logits[0]]
            if second > first:
                logits, past = decoder.step(ids[:, first:second], np.ones((1, second), dtype=np.int64), past)
                chunked.append(logits[0])
            chunked = _decode_rest(decoder, ids, second, past, chunked)
            chunked_vs_full.add(chunked, full)
            vs_reference.add(chunked, expected)

    if decoder.has_position_ids:
        # Left-padded batch: prefill all rows at once, then batched greedy decoding with the cache.
        batch_rows = rows
        ids, mask = left_pad(rows, pad_id)
        width = ids.shape[1]
        logits, past = decoder.step(ids, mask, decoder.empty_past(len(rows)))
        all_finite = bool(np.all(np.isfinite(logits)))
        for index, row in enumerate(rows):
            padded = logits[index, width - len(row):]
            padded_vs_single.add(padded, single_logits[index])
            vs_reference.add(padded, reference_logits[index])
    else:
        # GroupQueryAttention derives rotary positions from the mask and cannot skip left padding
        # the way the optimum graph does (uneven rows are generated one at a time): batch two rows
        # cut to the same length instead, then decode them together with the cache.
        pair = rows[:2] if len(rows) > 1 else rows * 2
        width = min(len(row) for row in pair)
        batch_rows = [row[:width] for row in pair]
        ids = np.asarray(batch_rows, dtype=np.int64)
        mask = np.ones_like(ids)
        logits, past = decoder.step(ids, mask, decoder.empty_past(len(batch_rows)))
        all_finite = bool(np.all(np.isfinite(logits)))
        for index, row in enumerate(batch_rows):
            equal_batch_vs_single.add(logits[index], decoder.full(row))
            vs_reference.add(logits[index], reference.logits([row])[0])
    generated = [[] for _ in batch_rows]
    step_logits = [[] for _ in batch_rows]
    for _ in range(decode_steps):
        next_tokens = np.argmax(logits[:, -1], axis=-1)
        for index, token in enumerate(next_tokens):
            generated[index].append(int(token))
        mask = np.concatenate([mask, np.ones((len(batch_rows), 1), dtype=np.int64)], axis=1)
        logits, past = decoder.step(next_tokens[:, None].astype(np.int64), mask, past)
        all_finite = all_finite and bool(np.all(np.isfinite(logits)))
        for index in range(len(batch_rows)):
            step_logits[index].append(logits[index, -1])
    batched_decode = Comparison()
    if decode_steps:
        for index, row in enumerate(batch_rows):
            expected = reference.logits([row + generated[index]])[0][len(row):]
            batched_decode.add(np.stack(step_logits[index]), expected)
            vs_reference.add(np.stack(step_logits[index]), expected)

    is_int4 = precision == "int4"
    consistency_tol = (INT4_CONSISTENCY_REL_TOL if is_int4 else CONSISTENCY_REL_TOL) * logit_scale
    failures = []
    if not all_finite:
        failures.append("non-finite logits in the padded batch")
    consistency = ([("cached_vs_full", cached_vs_full), ("padded_vs_single", padded_vs_single)]
                   if decoder.has_position_ids else
                   [("cached_vs_full", cached_vs_full), ("chunked_vs_full", chunked_vs_full),
                    ("equal_batch_vs_single", equal_batch_vs_single)])
    for name, comparison in consistency:
        if comparison.max_abs_diff > consistency_tol:
            failures.append(f"{name} max_abs_diff {comparison.max_abs_diff:.3g} > {consistency_tol:.3g}")
        agreement = comparison.summary()["argmax_agreement"]
        if is_int4 and agreement < INT4_MIN_CONSISTENCY_ARGMAX:
            failures.append(f"{name} argmax agreement {agreement} < {INT4_MIN_CONSISTENCY_ARGMAX}")
    summary_ref = vs_reference.summary()
    if is_int4:
        int4_method = decoder.config["frognano"].get("int4_method", "gguf")
        limits = INT4_TOLERANCES[int4_method]
        reference_tol = limits["rel_tol"] * logit_scale
        if summary_ref["argmax_agreement"] < limits["min_argmax"]:
            failures.append(f"argmax agreement {summary_ref['argmax_agreement']} < {limits['min_argmax']}")
        if summary_ref["top5_agreement"] < limits["min_top5"]:
            failures.append(f"top-5 agreement {summary_ref['top5_agreement']} < {limits['min_top5']}")
    else:
        int4_method = None
        reference_tol = FP32_REL_TOL * logit_scale
    if vs_reference.max_abs_diff > reference_tol:
        failures.append(f"vs_reference max_abs_diff {vs_reference.max_abs_diff:.3g} > {reference_tol:.3g}")

    summary = {
        "command": "check", "model_dir": str(model_dir), "layout": decoder.layout, "precision": precision,
        "reference": "huggingface" if checkpoint is not None else "gguf",
        "int4_method": int4_method,
        "row_lengths": [len(r) for r in rows], "logit_scale": round(logit_scale, 4),
        "vs_reference": summary_ref, "reference_tolerance": round(reference_tol, 6),
        "cached_vs_full": cached_vs_full.summary(), "padded_vs_single": padded_vs_single.summary(),
        "batched_decode_vs_reference": batched_decode.summary(),
        "consistency_tolerance": round(consistency_tol, 6), "all_finite": all_finite,
        "generated": generated, "ok": not failures, "failures": failures,
        "seconds": round(time.perf_counter() - started, 2),
    }
    if not decoder.has_position_ids:
        summary.update({"padded_vs_single": None, "chunked_vs_full": chunked_vs_full.summary(),
                        "equal_batch_vs_single": equal_batch_vs_single.summary(),
                        "batch_row_lengths": [len(r) for r in batch_rows]})
    return summary
