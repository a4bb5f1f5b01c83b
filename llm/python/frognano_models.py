#!/usr/bin/env python3
"""FrogNano model tools: llama GGUF or Hugging Face checkpoint -> ONNX decoder folders, plus
independent checks.

Torch-free: depends only on the standard library, numpy, gguf, onnx and onnxruntime
(safetensors files are read and written here directly; the format is an 8-byte header length,
a JSON header and raw little-endian tensor bytes).

Subcommands (progress lines go to stderr, a one-line JSON summary to stdout; a bad input ends
with one `error: ...` line on stderr and exit status 2):

  convert    GGUF (llama architecture) -> OUT/fp32 and OUT/int4 model folders, each holding
             model.onnx with its weights in model.onnx.data, config.json,
             generation_config.json, tokenizer.json, tokenizer_config.json and genai_config.json.
             The fp32 folder also holds model.safetensors: the dequantized fp32 weights under
             HF llama names in HF's Q/K row order, so that, with its config.json (a LlamaConfig),
             it doubles as a Hugging Face checkpoint (transformers' from_pretrained, `from-hf`).
             `--layout genai` writes the onnxruntime-genai builder layout instead, into
             OUT/genai-fp32 and OUT/genai-int4; `--layout all` writes both (four folders).
  from-hf    Hugging Face checkpoint folder (config.json, model.safetensors or a sharded
             model.safetensors.index.json, tokenizer.json, tokenizer_config.json; model_type
             llama incl. rope scaling "linear"/"llama3", qwen2 with its q/k/v biases, mistral;
             tied or untied embeddings; bf16/fp16/fp32 tensors) -> OUT/fp32 and/or OUT/int4
             (`--precisions`; int4 re-rounds with MatMulNBitsQuantizer, method "rtn").
  tiny       Writes a tiny random llama GGUF (OUT/tiny.gguf, quantized like SmolLM2's) and
             converts it exactly like `convert`, for fast tests; by default in both layouts
             (OUT/fp32, OUT/int4, OUT/genai-fp32, OUT/genai-int4; about 0.3 s).
  reference  Independent numpy forward pass over the dequantized GGUF weights, following
             llama.cpp's own conventions (GGUF Q/K row order, adjacent-pair rotary); with
             `--checkpoint`, over a HF checkpoint following transformers' (HF order, rotate_half).
  check      Compares an ONNX model folder against `reference` (`--gguf` or `--checkpoint`):
             full-sequence logits, KV-cached decoding, a left-padded batch and batched greedy
             decoding (genai layout: an equal-length batch instead of the left-padded one, plus
             chunked prefill).
  generate   Greedy chat generation with onnxruntime (a sanity tool).

In-process API (for a learner handing updated weights back; import this file as a module):

  export_onnx(config, tensors, out_dir, precisions=("fp32",), tokenizer_from=None,
              write_safetensors=True, source=None) -> dict
             config is a HF config.json as a dict, tensors maps HF names
             (model.embed_tokens.weight, model.layers.{i}.self_attn.{q,k,v,o}_proj.weight and
             biases, model.layers.{i}.mlp.{gate,up,down}_proj.weight,
             model.layers.{i}.{input,post_attention}_layernorm.weight, model.norm.weight,
             lm_head.weight when untied) to numpy arrays in the checkpoint's [out, in] layout.
             Writes out_dir/<precision> for each precision: the optimum layout below, config.json,
             generation_config.json (the tokenizer folder's, else from config), the tokenizer
             files copied from tokenizer_from (None: kept from the folder being replaced),
             genai_config.json and, for fp32, model.safetensors. Each folder is completed beside
             its target and renamed into place. Returns {"folders": {precision: path}, ...}.
             SmolLM2-135M fp32 with model.safetensors: about 2-3 s (see export_onnx).
  from_hf(checkpoint, out_dir, precisions) -> dict      the `from-hf` subcommand.
  read_safetensors(path), write_safetensors(path, tensors), read_checkpoint_tensors(folder).

Both sources go through one graph builder per layout (build_decoder_model,
build_genai_decoder_model), which takes HF-named tensors in HF order: GGUF tensors are
renamed and their Q/K rows un-permuted first (gguf_to_hf_tensors).

ONNX decoder layout "optimum" (HF optimum convention; the Rust runtime depends on it exactly):

  inputs   input_ids        int64   [batch_size, sequence_length]
           attention_mask   int64   [batch_size, total_sequence_length]   (0 on left padding)
           position_ids     int64   [batch_size, sequence_length]
           past_key_values.{i}.key / .value
                            float32 [batch_size, num_kv_heads, past_sequence_length, head_dim]
  outputs  logits           float32 [batch_size, sequence_length, vocab_size]
           present.{i}.key / .value
                            float32 [batch_size, num_kv_heads, total_sequence_length, head_dim]

total_sequence_length = past_sequence_length + sequence_length; the first step feeds a past of
length 0. Left-padded rows use position_ids = max(cumsum(attention_mask) - 1, 0). The causal mask
and the padding mask are built inside the graph; a query whose keys are all masked (a pad row)
attends uniformly instead of producing NaN.

int4 folders run the weight MatMuls as com.microsoft MatMulNBits (block 32, accuracy_level 4, so
activations go through int8). `--int4-method gguf` (default) carries the GGUF's own Q4_0/Q4_1/
Q8_0 blocks over without re-rounding (plus a small per-block correction for Q4_1's float
minimum), so int4 computes the GGUF's weights; `--int4-method rtn` re-quantizes the fp32 weights
with onnxruntime's MatMulNBitsQuantizer (asymmetric) instead. The embedding Gather stays fp32.

ONNX decoder layout "genai" (what onnxruntime-genai's model builder writes for llama on CPU,
builder 0.18.0: node, initializer, input and output names as it writes them; opset 22, IR 10,
all weights in model.onnx.data):

  inputs   input_ids        int64   [batch_size, sequence_length]
           attention_mask   int64   [batch_size, total_sequence_length]
           past_key_values.{i}.key  (all layers' keys first, then all values)
           past_key_values.{i}.value
                            float32 [batch_size, num_kv_heads, past_sequence_length, kv_cache_dim]
  outputs  logits           float32 [batch_size, sequence_length, vocab_size]
           present.{i}.key, then present.{i}.value
                            float32 [batch_size, num_kv_heads, total_sequence_length, kv_cache_dim]

There is no position_ids input: every layer is one com.microsoft GroupQueryAttention over a
packed QKV projection (do_rotary=1 with cos_cache/sin_cache [context_length, head_dim / 2],
rotary_interleaved=0 on HF-order Q/K rows, seqlens_k = sum(attention_mask) - 1 as int32,
total_sequence_length = attention_mask width as int32), and rotary positions come from
seqlens_k, so rows must not be left-padded (generate uneven rows one at a time). RMSNorms are
SimplifiedLayerNormalization (first) and com.microsoft SkipSimplifiedLayerNormalization (the rest,
fusing the residual adds). kv_cache_dim is symbolic, as the builder writes it; it equals
head_dim. The past may be fed at its actual length (present of the previous step, growing) or
as a max-length buffer shared with present (genai_config: past_present_share_buffer = true,
what onnxruntime-genai does). int4: the same MatMulNBits weights as in the optimum layout, with
the quantizer's names (node `<MatMul>_Q4`/`_Q8`, initializers `<weight>_Q4`, `_scales`,
`_zero_points`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import os
import re
import shutil
import sys
import time
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# gguf, onnx and onnxruntime are imported lazily (see the helpers below) so that `--help` and the
# pure-Python parts start fast.

# ----------------------------------------------------------------------------------------------
# Constants
# ----------------------------------------------------------------------------------------------

ONNX_OPSET = 17
ONNX_IR_VERSION = 8  # the IR version that goes with opset 17; keeps older onnxruntime builds happy
# The genai layout uses what onnxruntime-genai's builder (0.18.0) declares.
GENAI_ONNX_OPSET = 22
GENAI_ONNX_IR_VERSION = 10
LAYOUTS = ("optimum", "genai")

# Added to the attention scores of masked keys. Large enough that exp() underflows to exactly 0,
# small enough that adding it twice can never overflow to -inf (which would turn into NaN).
MASK_VALUE = -1.0e9

INT4_BLOCK_SIZE = 32  # also the block size of ggml's Q4_0, Q4_1 and Q8_0
INT4_IS_SYMMETRIC = False
INT4_ACCURACY_LEVEL = 4  # MatMulNBits computes with int8-quantized activations
# "gguf": carry the GGUF's own 4/8-bit blocks over (exact weights, see quantize_int4_from_gguf);
# "rtn": onnxruntime's MatMulNBitsQuantizer re-rounds the dequantized fp32 weights to 4 bits.
INT4_METHODS = ("gguf", "rtn")

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

# llama.cpp token types (gguf.TokenType)
TOKEN_TYPE_NORMAL = 1
TOKEN_TYPE_CONTROL = 3
TOKEN_TYPE_USER_DEFINED = 4

# Pre-tokenizer of GGUF `tokenizer.ggml.pre = smollm` (llama.cpp): isolate every numeric
# character, then split with the GPT-2 regex.
DIGIT_SPLIT_REGEX = r"\p{N}"
GPT2_SPLIT_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

DEFAULT_CHECK_SYSTEM = "You are a helpful AI assistant."
DEFAULT_CHECK_PROMPTS = (
    ("chat", "Write a Python function that reverses a string."),
    ("text", "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + "),
    ("text", "The quick brown fox jumps over 13 lazy dogs."),
)


def log(message: str) -> None:
    """Prints one progress line to stderr."""
    print(f"[frognano_models] {message}", file=sys.stderr, flush=True)


def sha256_of_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _gguf():
    import gguf  # noqa: PLC0415 - lazy import, see the module header

    return gguf


# ----------------------------------------------------------------------------------------------
# Reading a llama GGUF
# ----------------------------------------------------------------------------------------------


def gguf_field(reader, key: str, default=None):
    """Returns the decoded value of a GGUF metadata key (scalars, strings and arrays)."""
    field = reader.fields.get(key)
    if field is None:
        return default
    return field.contents()


@dataclass(frozen=True)
class LlamaHParams:
    """Hyper-parameters of a llama-architecture GGUF, named like HF's LlamaConfig."""

    num_hidden_layers: int
    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    max_position_embeddings: int
    rope_theta: float
    rms_norm_eps: float
    tie_word_embeddings: bool
    model_type: str = "llama"  # llama, qwen2 or mistral (HF config.json)
    # q/k/v (and for llama's attention_bias also o) projections carry biases (Qwen2).
    attention_bias: bool = False
    # HF rope scaling ({"rope_type": "linear" | "llama3", "factor": ..., ...}) or None.
    rope_scaling: dict | None = None

    @property
    def heads_per_kv_head(self) -> int:
        return self.num_attention_heads // self.num_key_value_heads


def read_hparams(reader) -> LlamaHParams:
    """Reads and validates the llama hyper-parameters of a GGUF file."""
    arch = gguf_field(reader, "general.architecture")
    if arch != "llama":
        raise ValueError(f"unsupported GGUF architecture {arch!r} (only 'llama')")
    rope_scaling = gguf_field(reader, "llama.rope.scaling.type")
    if rope_scaling not in (None, "none"):
        raise ValueError(f"rope scaling {rope_scaling!r} is not supported")
    hidden = int(gguf_field(reader, "llama.embedding_length"))
    heads = int(gguf_field(reader, "llama.attention.head_count"))
    kv_heads = int(gguf_field(reader, "llama.attention.head_count_kv", heads))
    head_dim = int(gguf_field(reader, "llama.attention.key_length", hidden // heads))
    rope_dims = int(gguf_field(reader, "llama.rope.dimension_count", head_dim))
    if rope_dims != head_dim:
        raise ValueError(f"partial rotary ({rope_dims} of {head_dim} dims) is not supported")
    if heads % kv_heads:
        raise ValueError(f"{heads} heads are not a multiple of {kv_heads} KV heads")
    tokens = reader.fields["tokenizer.ggml.tokens"]
    vocab = int(gguf_field(reader, "llama.vocab_size", len(tokens.data)))
    names = {tensor.name for tensor in reader.tensors}
    return LlamaHParams(
        num_hidden_layers=int(gguf_field(reader, "llama.block_count")),
        hidden_size=hidden,
        intermediate_size=int(gguf_field(reader, "llama.feed_forward_length")),
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        vocab_size=vocab,
        max_position_embeddings=int(gguf_field(reader, "llama.context_length")),
        rope_theta=float(gguf_field(reader, "llama.rope.freq_base", 10000.0)),
        rms_norm_eps=float(gguf_field(reader, "llama.attention.layer_norm_rms_epsilon")),
        tie_word_embeddings="output.weight" not in names,
    )


def dequantized_tensors(reader) -> dict[str, np.ndarray]:
    """All tensors of a GGUF as float32 numpy arrays in [rows, columns] (= HF [out, in]) order."""
    gguf = _gguf()
    tensors = {}
    for tensor in reader.tensors:
        values = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
        tensors[tensor.name] = np.asarray(values, dtype=np.float32)
    return tensors


# ----------------------------------------------------------------------------------------------
# Converter: weights
# ----------------------------------------------------------------------------------------------


def gguf_rows_to_rotate_half_rows(weight: np.ndarray, num_heads: int) -> np.ndarray:
    """Undoes llama.cpp's Q/K row permutation.

    convert_hf_to_gguf.py reorders the rows of every head of q_proj/k_proj so that llama.cpp can
    rotate adjacent pairs (x[2i], x[2i+1]); HF's rotate_half rotates (x[i], x[i + d/2]). Within a
    head, GGUF row 2*i + j holds HF row j*(d/2) + i. Returns the rows in HF order so the graph can
    use rotate_half.
    """
    rows, columns = weight.shape
    head_dim = rows // num_heads
    return (
        weight.reshape(num_heads, head_dim // 2, 2, columns)
        .swapaxes(1, 2)
        .reshape(rows, columns)
    )


def rope_inverse_frequency(hp: LlamaHParams) -> np.ndarray:
    """The rotary inverse frequencies [head_dim / 2] in float64, like transformers'
    ROPE_INIT_FUNCTIONS: "default", "linear" (divided by factor) and "llama3" (long wavelengths
    divided by factor, a smooth blend between low_freq_factor and high_freq_factor)."""
    half = hp.head_dim // 2
    inverse_frequency = hp.rope_theta ** (-np.arange(half, dtype=np.float64) * 2.0 / hp.head_dim)
    scaling = hp.rope_scaling or {}
    rope_type = scaling.get("rope_type", scaling.get("type", "default"))
    if rope_type == "default":
        return inverse_frequency
    factor = float(scaling["factor"])
    if rope_type == "linear":
        return inverse_frequency / factor
    if rope_type == "llama3":
        low_freq_factor = float(scaling["low_freq_factor"])
        high_freq_factor = float(scaling["high_freq_factor"])
        old_context = float(scaling["original_max_position_embeddings"])
        low_freq_wavelen = old_context / low_freq_factor
        high_freq_wavelen = old_context / high_freq_factor
        wavelen = 2.0 * math.pi / inverse_frequency
        scaled = np.where(wavelen > low_freq_wavelen, inverse_frequency / factor, inverse_frequency)
        smooth = (old_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
        smoothed = (1.0 - smooth) * scaled / factor + smooth * scaled
        medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
        return np.where(medium, smoothed, scaled)
    raise ValueError(f"rope scaling type {rope_type!r} is not supported (default, linear, llama3)")


def rotary_tables(hp: LlamaHParams) -> tuple[np.ndarray, np.ndarray]:
    """cos and sign-folded sin tables, [max_position_embeddings, head_dim], in rotate_half layout.

    sin_signed = [-sin, sin] so that rotate_half(x) * sin == concat(x2, x1) * sin_signed.
    Computed in float64 and rounded once.
    """
    inverse_frequency = rope_inverse_frequency(hp)
    angles = np.arange(hp.max_position_embeddings, dtype=np.float64)[:, None] * inverse_frequency
    cos = np.cos(angles)
    sin = np.sin(angles)
    cos_table = np.concatenate([cos, cos], axis=1).astype(np.float32)
    sin_signed_table = np.concatenate([-sin, sin], axis=1).astype(np.float32)
    return cos_table, sin_signed_table


# ----------------------------------------------------------------------------------------------
# Hugging Face checkpoints: tensor names, safetensors, config.json
# ----------------------------------------------------------------------------------------------

# HF model_type -> architectures[0]. All three are the same decoder (RMSNorm, rotate_half RoPE,
# GQA, SiLU-gated MLP); qwen2 adds q/k/v biases.
HF_ARCHITECTURES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                    "mistral": "MistralForCausalLM"}
HF_WEIGHT_FILE = "model.safetensors"
HF_INDEX_FILE = "model.safetensors.index.json"
# Copied from a checkpoint into every model folder (the first two are required).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
OPTIONAL_TOKENIZER_FILES = ("chat_template.jinja", "special_tokens_map.json")

# safetensors dtype codes <-> numpy ("BF16" has no numpy dtype: read as uint16, widened by hand).
SAFETENSORS_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16,
                      "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
                      "U8": np.uint8, "BOOL": np.bool_}
_NUMPY_TO_SAFETENSORS = {np.dtype(v).str: k for k, v in SAFETENSORS_DTYPES.items() if k != "BF16"}


class ConversionError(ValueError):
    """A checkpoint that cannot be converted (reported as one line, exit status 2)."""


def hf_layer_linear_names(hp: LlamaHParams, layer: int) -> dict[str, tuple[int, int]]:
    """HF names of a layer's projection weights -> their [out, in] shapes."""
    hidden, heads, kv_heads, head_dim = (hp.hidden_size, hp.num_attention_heads,
                                         hp.num_key_value_heads, hp.head_dim)
    p = f"model.layers.{layer}."
    return {
        p + "self_attn.q_proj.weight": (heads * head_dim, hidden),
        p + "self_attn.k_proj.weight": (kv_heads * head_dim, hidden),
        p + "self_attn.v_proj.weight": (kv_heads * head_dim, hidden),
        p + "self_attn.o_proj.weight": (hidden, heads * head_dim),
        p + "mlp.gate_proj.weight": (hp.intermediate_size, hidden),
        p + "mlp.up_proj.weight": (hp.intermediate_size, hidden),
        p + "mlp.down_proj.weight": (hidden, hp.intermediate_size),
    }


def hf_tensor_shapes(hp: LlamaHParams) -> dict[str, tuple[int, ...]]:
    """Every tensor a checkpoint of these hyper-parameters must hold, with its shape."""
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (hp.vocab_size, hp.hidden_size)}
    for layer in range(hp.num_hidden_layers):
        p = f"model.layers.{layer}."
        shapes.update(hf_layer_linear_names(hp, layer))
        shapes[p + "input_layernorm.weight"] = (hp.hidden_size,)
        shapes[p + "post_attention_layernorm.weight"] = (hp.hidden_size,)
        if hp.attention_bias:
            shapes[p + "self_attn.q_proj.bias"] = (hp.num_attention_heads * hp.head_dim,)
            shapes[p + "self_attn.k_proj.bias"] = (hp.num_key_value_heads * hp.head_dim,)
            shapes[p + "self_attn.v_proj.bias"] = (hp.num_key_value_heads * hp.head_dim,)
            if hp.model_type == "llama":  # llama's attention_bias also covers o_proj
                shapes[p + "self_attn.o_proj.bias"] = (hp.hidden_size,)
    shapes["model.norm.weight"] = (hp.hidden_size,)
    if not hp.tie_word_embeddings:
        shapes["lm_head.weight"] = (hp.vocab_size, hp.hidden_size)
    return shapes


def checked_hf_tensors(hp: LlamaHParams, tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The tensors the graph needs, as float32, after checking names and shapes (one clear error
    for the first problem). Extra tensors (rotary_emb.inv_freq, a tied lm_head copy) are dropped."""
    out = {}
    for name, shape in hf_tensor_shapes(hp).items():
        if name not in tensors:
            raise ConversionError(f"missing tensor {name!r}")
        array = np.asarray(tensors[name])
        if tuple(array.shape) != shape:
            raise ConversionError(f"tensor {name!r} has shape {list(array.shape)}, expected {list(shape)}")
        if not np.issubdtype(array.dtype, np.floating):
            raise ConversionError(f"tensor {name!r} has dtype {array.dtype}, expected a float type")
        out[name] = array if array.dtype == np.float32 else array.astype(np.float32)
    return out


def gguf_to_hf_tensors(hp: LlamaHParams, tensors: dict[str, np.ndarray]
                       ) -> tuple[dict[str, np.ndarray], dict[str, LinearSource]]:
    """Renames dequantized GGUF tensors to HF llama names and undoes the Q/K row permutation.

    Returns (HF tensors, origins): origins maps every projection weight's HF name to the GGUF
    tensor it came from (and its row permutation), for the int4 "gguf" method.
    """
    hf: dict[str, np.ndarray] = {"model.embed_tokens.weight": tensors["token_embd.weight"],
                                 "model.norm.weight": tensors["output_norm.weight"]}
    origins: dict[str, LinearSource] = {}
    gguf_linear = {"self_attn.q_proj": ("attn_q", hp.num_attention_heads),
                   "self_attn.k_proj": ("attn_k", hp.num_key_value_heads),
                   "self_attn.v_proj": ("attn_v", 0), "self_attn.o_proj": ("attn_output", 0),
                   "mlp.gate_proj": ("ffn_gate", 0), "mlp.up_proj": ("ffn_up", 0),
                   "mlp.down_proj": ("ffn_down", 0)}
    for layer in range(hp.num_hidden_layers):
        p, b = f"model.layers.{layer}.", f"blk.{layer}."
        hf[p + "input_layernorm.weight"] = tensors[b + "attn_norm.weight"]
        hf[p + "post_attention_layernorm.weight"] = tensors[b + "ffn_norm.weight"]
        for hf_name, (gguf_name, rotary_heads) in gguf_linear.items():
            weight = tensors[f"{b}{gguf_name}.weight"]
            if rotary_heads:
                weight = np.ascontiguousarray(gguf_rows_to_rotate_half_rows(weight, rotary_heads))
            hf[f"{p}{hf_name}.weight"] = weight
            origins[f"{p}{hf_name}.weight"] = LinearSource(f"{b}{gguf_name}.weight", rotary_heads)
    if hp.tie_word_embeddings:
        origins["lm_head.weight"] = LinearSource("token_embd.weight")
    else:
        hf["lm_head.weight"] = tensors["output.weight"]
        origins["lm_head.weight"] = LinearSource("output.weight")
    return hf, origins


def write_safetensors(path: Path, tensors: dict[str, np.ndarray],
                      metadata: dict[str, str] | None = None) -> Path:
    """Writes tensors in the safetensors format: an 8-byte little-endian header length, a JSON
    header ({name: {dtype, shape, data_offsets}}, "__metadata__"; padded with spaces to a multiple
    of 8), then every tensor's little-endian bytes back to back. Written to a temporary name and
    renamed, so a reader never sees half a file."""
    header: dict[str, dict] = {}
    arrays = []
    offset = 0
    for name in sorted(tensors):
        array = np.asarray(tensors[name])
        array = array.astype(array.dtype.newbyteorder("<"), copy=False)
        dtype = _NUMPY_TO_SAFETENSORS.get(array.dtype.str)
        if dtype is None:
            raise ValueError(f"cannot write dtype {array.dtype} of {name!r} to safetensors")
        array = np.ascontiguousarray(array)
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
        arrays.append(array)
    header["__metadata__"] = {"format": "pt", **(metadata or {})}
    blob = json.dumps(header, separators=(",", ":")).encode("utf-8")
    blob += b" " * (-len(blob) % 8)
    partial = path.with_name(path.name + ".partial")
    with open(partial, "wb") as handle:
        handle.write(len(blob).to_bytes(8, "little"))
        handle.write(blob)
        for array in arrays:
            handle.write(array.data if array.ndim else array.tobytes())
    partial.replace(path)
    return path


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Reads a safetensors file (memory-mapped: arrays are views into the file). Float tensors come
    back as float32 (bf16 and fp16 widened exactly; fp32 without a copy), others as stored."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        prefix = handle.read(8)
        if len(prefix) < 8:
            raise ConversionError(f"{path.name} is not a safetensors file (too short)")
        header_len = int.from_bytes(prefix, "little")
        if header_len > size - 8:
            raise ConversionError(f"{path.name} is not a safetensors file (bad header length)")
        try:
            header = json.loads(handle.read(header_len))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ConversionError(f"{path.name} has an unreadable safetensors header: {error}") from None
    start = 8 + header_len
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=start, shape=(size - start,)) \
        if size > start else np.zeros(0, dtype=np.uint8)
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype = SAFETENSORS_DTYPES.get(entry.get("dtype"))
        if dtype is None:
            raise ConversionError(f"tensor {name!r} in {path.name} has unsupported dtype "
                                  f"{entry.get('dtype')!r}")
        begin, end = entry["data_offsets"]
        shape = tuple(entry["shape"])
        expected_bytes = math.prod(shape) * np.dtype(dtype).itemsize
        if not 0 <= begin <= end <= data.shape[0] or end - begin != expected_bytes:
            raise ConversionError(f"tensor {name!r} in {path.name} has inconsistent data offsets")
        array = data[begin:end].view(np.dtype(dtype).newbyteorder("<")).reshape(shape)
        if entry["dtype"] == "BF16":
            array = (array.astype(np.uint32) << 16).view(np.float32)
        elif entry["dtype"] in ("F16", "F64"):
            array = array.astype(np.float32)
        tensors[name] = array
    return tensors


def read_checkpoint_tensors(checkpoint: Path) -> dict[str, np.ndarray]:
    """All tensors of a HF checkpoint folder: model.safetensors, or the shards that
    model.safetensors.index.json names."""
    index = checkpoint / HF_INDEX_FILE
    if (checkpoint / HF_WEIGHT_FILE).is_file():
        files = [checkpoint / HF_WEIGHT_FILE]
    elif index.is_file():
        weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map", {})
        files = [checkpoint / name for name in sorted(set(weight_map.values()))]
        for file in files:
            if not file.is_file():
                raise ConversionError(f"{HF_INDEX_FILE} names {file.name}, which is missing")
    else:
        raise ConversionError(f"{checkpoint} has no {HF_WEIGHT_FILE} or {HF_INDEX_FILE} "
                              "(only safetensors checkpoints are supported)")
    tensors: dict[str, np.ndarray] = {}
    for file in files:
        tensors.update(read_safetensors(file))
    return tensors


def _rope_scaling_of(config: dict) -> tuple[float, dict | None]:
    """(rope_theta, rope scaling or None) from a config.json in the transformers 4 style
    (rope_theta + rope_scaling) or the transformers 5 style (rope_parameters)."""
    parameters = config.get("rope_parameters") or {}
    theta = config.get("rope_theta", parameters.get("rope_theta", 10000.0))
    scaling = config.get("rope_scaling") or {k: v for k, v in parameters.items() if k != "rope_theta"}
    rope_type = scaling.get("rope_type", scaling.get("type", "default")) if scaling else "default"
    if rope_type not in ("default", "linear", "llama3"):
        raise ConversionError(f"rope scaling type {rope_type!r} is not supported (default, linear, llama3)")
    if rope_type == "default":
        return float(theta), None
    required = ["factor"] + (["low_freq_factor", "high_freq_factor", "original_max_position_embeddings"]
                             if rope_type == "llama3" else [])
    missing = [key for key in required if key not in scaling]
    if missing:
        raise ConversionError(f"rope scaling {rope_type!r} lacks {', '.join(missing)}")
    return float(theta), {"rope_type": rope_type, **{k: scaling[k] for k in required}}


def hparams_from_hf_config(config: dict) -> LlamaHParams:
    """Reads and validates a HF config.json (llama, qwen2 or mistral)."""
    model_type = config.get("model_type")
    if model_type not in HF_ARCHITECTURES:
        architectures = config.get("architectures") or []
        raise ConversionError(f"unsupported architecture {model_type!r} {architectures} "
                              f"(supported model_type: {', '.join(HF_ARCHITECTURES)})")
    if config.get("quantization_config"):
        raise ConversionError("quantized checkpoints are not supported (config has quantization_config)")
    activation = config.get("hidden_act", "silu")
    if activation != "silu":
        raise ConversionError(f"hidden_act {activation!r} is not supported (only silu)")
    if config.get("mlp_bias"):
        raise ConversionError("mlp_bias is not supported")
    if model_type == "qwen2" and config.get("use_sliding_window"):
        raise ConversionError("qwen2 with use_sliding_window is not supported")
    if float(config.get("partial_rotary_factor", 1.0)) != 1.0:
        raise ConversionError("partial rotary (partial_rotary_factor != 1) is not supported")
    try:
        hidden = int(config["hidden_size"])
        heads = int(config["num_attention_heads"])
        kv_heads = int(config.get("num_key_value_heads") or heads)
        head_dim = int(config.get("head_dim") or hidden // heads)
        layers = int(config["num_hidden_layers"])
        intermediate = int(config["intermediate_size"])
        vocab = int(config["vocab_size"])
        context = int(config.get("max_position_embeddings", 2048))
        eps = float(config.get("rms_norm_eps", 1e-6))
    except KeyError as error:
        raise ConversionError(f"config.json lacks {error.args[0]!r}") from None
    if heads % kv_heads:
        raise ConversionError(f"{heads} heads are not a multiple of {kv_heads} KV heads")
    if head_dim % 2:
        raise ConversionError(f"head_dim {head_dim} is odd")
    window = config.get("sliding_window") if model_type == "mistral" else None
    if window:
        # Full attention equals sliding-window attention for sequences within the window.
        context = min(context, int(window))
    theta, scaling = _rope_scaling_of(config)
    attention_bias = model_type == "qwen2" or bool(config.get("attention_bias", False))
    return LlamaHParams(
        num_hidden_layers=layers, hidden_size=hidden, intermediate_size=intermediate,
        num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=head_dim,
        vocab_size=vocab, max_position_embeddings=context, rope_theta=theta, rms_norm_eps=eps,
        tie_word_embeddings=bool(config.get("tie_word_embeddings", False)), model_type=model_type,
        attention_bias=attention_bias, rope_scaling=scaling)


# ----------------------------------------------------------------------------------------------
# Converter: ONNX graph
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LinearSource:
    """How a MatMul weight initializer (W^T) was derived from a GGUF tensor W [out, in]."""

    gguf_name: str
    rotary_heads: int = 0  # > 0: rows un-permuted with gguf_rows_to_rotate_half_rows
    scale: float = 1.0


# Streaming external data (GraphBuilder with a data file): tensors from this size on go to
# model.onnx.data; tensors of a MiB or more start at a multiple of 64 KiB (the allocation
# granularity onnx's own writer aligns to, so that the file can be memory-mapped), others at 64.
EXTERNAL_DATA_THRESHOLD = 1024
EXTERNAL_DATA_ALIGNMENT = (1 << 20, 1 << 16, 64)


def _write_external_tensor(data_file, name: str, array: np.ndarray):
    """Appends array's bytes to data_file (aligned) and returns a TensorProto referencing them."""
    from onnx import TensorProto, helper  # noqa: PLC0415

    big, big_alignment, small_alignment = EXTERNAL_DATA_ALIGNMENT
    alignment = big_alignment if array.nbytes >= big else small_alignment
    offset = data_file.tell()
    padding = -offset % alignment
    if padding:
        data_file.write(b"\0" * padding)
        offset += padding
    array = array.astype(array.dtype.newbyteorder("<"), copy=False)
    data_file.write(array.data)
    tensor = TensorProto()
    tensor.name = name
    tensor.data_type = helper.np_dtype_to_tensor_dtype(array.dtype)
    tensor.dims.extend(array.shape)
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", Path(data_file.name).name), ("offset", str(offset)),
                       ("length", str(array.nbytes))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return tensor


class GraphBuilder:
    """Accumulates ONNX nodes and initializers under unique, readable names.

    With `data_file` (an open binary file, `model.onnx.data` next to the model), initializers of
    EXTERNAL_DATA_THRESHOLD bytes or more are written straight into it as they are made (aligned,
    see EXTERNAL_DATA_ALIGNMENT) and the graph only references them: no copy of the weights is
    held in the protobuf, which makes saving a fp32 model one pass over its bytes.
    """

    def __init__(self, data_file=None):
        from onnx import numpy_helper  # noqa: PLC0415

        self._numpy_helper = numpy_helper
        self.nodes = []
        self.initializers = []
        self._used_names: set[str] = set()
        self._constants: dict[tuple, str] = {}
        self._data_file = data_file
        # MatMul weight initializer -> where its values came from in the GGUF (for int4 "gguf").
        self.linear_sources: dict[str, LinearSource] = {}

    def unique_name(self, hint: str) -> str:
        name, counter = hint, 1
        while name in self._used_names:
            counter += 1
            name = f"{hint}_{counter}"
        self._used_names.add(name)
        return name

    def initializer(self, name: str, array: np.ndarray) -> str:
        name = self.unique_name(name)
        array = np.ascontiguousarray(array)
        if self._data_file is not None and array.nbytes >= EXTERNAL_DATA_THRESHOLD:
            self.initializers.append(_write_external_tensor(self._data_file, name, array))
        else:
            self.initializers.append(self._numpy_helper.from_array(array, name))
        return name

    def constant(self, value, dtype) -> str:
        """A cached small constant initializer (a Python scalar gives a 0-d tensor)."""
        array = np.array(value, dtype=dtype)
        key = (array.dtype.str, array.shape, tuple(array.ravel().tolist()))
        if key not in self._constants:
            self._constants[key] = self.initializer("const", array)
        return self._constants[key]

    def int64s(self, *values: int) -> str:
        return self.constant(list(values), np.int64)

    def node(self, op_type: str, inputs: list[str], name: str, outputs=None, num_outputs=1,
             domain: str | None = None, **attributes):
        """Adds a node; returns its output name (or the list of names when num_outputs > 1)."""
        from onnx import helper  # noqa: PLC0415

        node_name = self.unique_name(name)
        if outputs is None:
            outputs = [f"{node_name}/out{i}" if num_outputs > 1 else f"{node_name}/out"
                       for i in range(num_outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, outputs, name=node_name,
                                           domain=domain, **attributes))
        return outputs[0] if len(outputs) == 1 else outputs


def _rms_norm(g: GraphBuilder, x: str, weight: str, eps: float, name: str) -> str:
    # This exact pattern is fused by onnxruntime into SimplifiedLayerNormalization.
    squared = g.node("Pow", [x, g.constant(2.0, np.float32)], f"{name}/pow")
    mean = g.node("ReduceMean", [squared], f"{name}/mean", axes=[-1], keepdims=1)
    variance = g.node("Add", [mean, g.constant(eps, np.float32)], f"{name}/add_eps")
    rms = g.node("Sqrt", [variance], f"{name}/sqrt")
    normalized = g.node("Div", [x, rms], f"{name}/div")
    return g.node("Mul", [normalized, weight], f"{name}/scale")


def _rotary(g: GraphBuilder, x: str, cos: str, sin_signed: str, head_dim: int, name: str) -> str:
    """x * cos + rotate_half(x) * sin on [..., head_dim] with HF (rotate_half) layout."""
    half = g.int64s(head_dim // 2, head_dim // 2)
    first, second = g.node("Split", [x, half], f"{name}/split", num_outputs=2, axis=-1)
    swapped = g.node("Concat", [second, first], f"{name}/swap", axis=-1)
    return g.node("Add", [g.node("Mul", [x, cos], f"{name}/mul_cos"),
                          g.node("Mul", [swapped, sin_signed], f"{name}/mul_sin")], f"{name}/add")


def _attention_bias(g: GraphBuilder) -> str:
    """Additive attention bias [batch, 1, 1, seq, total]: 0 where allowed, MASK_VALUE elsewhere.

    Query j of this chunk sits at cache index past + j; it may see key k when k <= past + j
    (causal) and attention_mask[b, k] != 0 (not padding).
    """
    seq_len = g.node("Shape", ["input_ids"], "mask/seq_len", start=1, end=2)
    total_len = g.node("Shape", ["attention_mask"], "mask/total_len", start=1, end=2)
    past_len = g.node("Sub", [total_len, seq_len], "mask/past_len")
    zero, one = g.constant(0, np.int64), g.constant(1, np.int64)
    total_scalar = g.node("Squeeze", [total_len, g.int64s(0)], "mask/total_scalar")
    past_scalar = g.node("Squeeze", [past_len, g.int64s(0)], "mask/past_scalar")
    query_index = g.node("Range", [past_scalar, total_scalar, one], "mask/query_index")
    key_index = g.node("Range", [zero, total_scalar, one], "mask/key_index")
    causal = g.node("LessOrEqual", [g.node("Unsqueeze", [key_index, g.int64s(0)], "mask/key_row"),
                                    g.node("Unsqueeze", [query_index, g.int64s(1)], "mask/query_col")],
                    "mask/causal")  # [seq, total]
    not_padding = g.node("Cast", ["attention_mask"], "mask/not_padding", to=9)  # 9 = BOOL
    not_padding = g.node("Unsqueeze", [not_padding, g.int64s(1, 2, 3)], "mask/not_padding_5d")
    allowed = g.node("And", [causal, not_padding], "mask/allowed")  # [batch, 1, 1, seq, total]
    return g.node("Where", [allowed, g.constant(0.0, np.float32), g.constant(MASK_VALUE, np.float32)],
                  "mask/bias")


def build_decoder_model(hp: LlamaHParams, tensors: dict[str, np.ndarray], metadata: dict[str, str],
                        origins: dict[str, LinearSource] | None = None, data_file=None):
    """Builds the fp32 ONNX decoder (see the module docstring for its inputs and outputs) from
    HF-named tensors in HF order (checked_hf_tensors or gguf_to_hf_tensors); the one graph
    builder of the optimum layout for GGUF and HF sources alike.

    origins: the GGUF tensors behind the projection weights (gguf_to_hf_tensors), recorded per
    MatMul weight initializer for the int4 "gguf" method. data_file: stream the weights into
    that external data file (see GraphBuilder). Returns (model, linear_sources).
    """
    from onnx import TensorProto, helper  # noqa: PLC0415

    origins = origins or {}
    g = GraphBuilder(data_file)
    heads, kv_heads, head_dim = hp.num_attention_heads, hp.num_key_value_heads, hp.head_dim
    batch, seq, past, total = ("batch_size", "sequence_length", "past_sequence_length",
                               "total_sequence_length")

    graph_inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, [batch, seq]),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [batch, total]),
        helper.make_tensor_value_info("position_ids", TensorProto.INT64, [batch, seq]),
    ]
    graph_outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                                   [batch, seq, hp.vocab_size])]
    for layer in range(hp.num_hidden_layers):
        for kind in ("key", "value"):
            graph_inputs.append(helper.make_tensor_value_info(
                f"past_key_values.{layer}.{kind}", TensorProto.FLOAT, [batch, kv_heads, past, head_dim]))
            graph_outputs.append(helper.make_tensor_value_info(
                f"present.{layer}.{kind}", TensorProto.FLOAT, [batch, kv_heads, total, head_dim]))

    embed_tokens = tensors["model.embed_tokens.weight"]
    embed = g.initializer("model.embed_tokens.weight", embed_tokens)
    hidden = g.node("Gather", [embed, "input_ids"], "embed_tokens", axis=0)

    cos_table, sin_table = rotary_tables(hp)
    cos = g.node("Gather", [g.initializer("rotary.cos_table", cos_table), "position_ids"], "rotary/cos")
    sin = g.node("Gather", [g.initializer("rotary.sin_signed_table", sin_table), "position_ids"],
                 "rotary/sin")
    cos = g.node("Unsqueeze", [cos, g.int64s(1)], "rotary/cos_4d")  # [batch, 1, seq, head_dim]
    sin = g.node("Unsqueeze", [sin, g.int64s(1)], "rotary/sin_4d")
    bias = _attention_bias(g)

    query_scale = 1.0 / math.sqrt(head_dim)
    for layer in range(hp.num_hidden_layers):
        hf = f"model.layers.{layer}"

        def linear(x: str, module: str, scale: float = 1.0, _hf=hf) -> str:
            """x @ W^T (+ b) for the HF module `<layer>.<module>`; W^T ([in, out]) and b are
            initializers, optionally scaled."""
            weight_name = f"{_hf}.{module}.weight"
            weight = tensors[weight_name]
            if scale != 1.0:
                weight = weight * np.float32(scale)
            name = g.initializer(f"{weight_name}_t", weight.T)
            origin = origins.get(weight_name)
            if origin is not None:
                g.linear_sources[name] = LinearSource(origin.gguf_name, origin.rotary_heads, scale)
            out = g.node("MatMul", [x, name], f"{_hf}/{module.split('.')[-1]}")
            bias_values = tensors.get(f"{_hf}.{module}.bias")
            if bias_values is not None:
                if scale != 1.0:
                    bias_values = bias_values * np.float32(scale)
                out = g.node("Add", [out, g.initializer(f"{_hf}.{module}.bias", bias_values)],
                             f"{_hf}/{module.split('.')[-1]}_bias")
            return out

        # --- self attention
        normed = _rms_norm(g, hidden, g.initializer(f"{hf}.input_layernorm.weight",
                                                    tensors[f"{hf}.input_layernorm.weight"]),
                           hp.rms_norm_eps, f"{hf}/input_layernorm")
        # 1/sqrt(head_dim) is folded into q_proj (rotary is linear, so the order does not matter).
        q = linear(normed, "self_attn.q_proj", query_scale)
        k = linear(normed, "self_attn.k_proj")
        v = linear(normed, "self_attn.v_proj")

        def split_heads(x: str, count: int, name: str) -> str:
            x = g.node("Reshape", [x, g.int64s(0, 0, count, head_dim)], f"{name}/reshape")
            return g.node("Transpose", [x], f"{name}/transpose", perm=[0, 2, 1, 3])

        q = _rotary(g, split_heads(q, heads, f"{hf}/q"), cos, sin, head_dim, f"{hf}/q_rotary")
        k = _rotary(g, split_heads(k, kv_heads, f"{hf}/k"), cos, sin, head_dim, f"{hf}/k_rotary")
        v = split_heads(v, kv_heads, f"{hf}/v")
        present_key = g.node("Concat", [f"past_key_values.{layer}.key", k], f"{hf}/present_key",
                             outputs=[f"present.{layer}.key"], axis=2)
        present_value = g.node("Concat", [f"past_key_values.{layer}.value", v], f"{hf}/present_value",
                               outputs=[f"present.{layer}.value"], axis=2)

        # GQA without copying the cache: view queries as [batch, kv_heads, group, seq, head_dim]
        # and let MatMul broadcast K/V ([batch, kv_heads, 1, ...]) over the group axis. Query
        # head h uses KV head h // group, as in HF's repeat_kv.
        q = g.node("Reshape", [q, g.int64s(0, kv_heads, hp.heads_per_kv_head, -1, head_dim)],
                   f"{hf}/q_grouped")
        keys_t = g.node("Transpose", [present_key], f"{hf}/keys_t", perm=[0, 1, 3, 2])
        keys_t = g.node("Unsqueeze", [keys_t, g.int64s(2)], f"{hf}/keys_t_5d")
        scores = g.node("MatMul", [q, keys_t], f"{hf}/scores")  # [batch, kv, group, seq, total]
        scores = g.node("Add", [scores, bias], f"{hf}/masked_scores")
        probs = g.node("Softmax", [scores], f"{hf}/softmax", axis=-1)
        values = g.node("Unsqueeze", [present_value, g.int64s(2)], f"{hf}/values_5d")
        context = g.node("MatMul", [probs, values], f"{hf}/context")  # [batch, kv, group, seq, d]
        context = g.node("Transpose", [context], f"{hf}/context_t", perm=[0, 3, 1, 2, 4])
        context = g.node("Reshape", [context, g.int64s(0, 0, heads * head_dim)], f"{hf}/context_flat")
        attention = linear(context, "self_attn.o_proj")
        hidden = g.node("Add", [hidden, attention], f"{hf}/attn_residual")

        # --- SiLU-gated MLP
        normed = _rms_norm(g, hidden, g.initializer(f"{hf}.post_attention_layernorm.weight",
                                                    tensors[f"{hf}.post_attention_layernorm.weight"]),
                           hp.rms_norm_eps, f"{hf}/post_attention_layernorm")
        gate = linear(normed, "mlp.gate_proj")
        up = linear(normed, "mlp.up_proj")
        activated = g.node("Mul", [gate, g.node("Sigmoid", [gate], f"{hf}/sigmoid")], f"{hf}/silu")
        down = linear(g.node("Mul", [activated, up], f"{hf}/gated"), "mlp.down_proj")
        hidden = g.node("Add", [hidden, down], f"{hf}/mlp_residual")

    normed = _rms_norm(g, hidden, g.initializer("model.norm.weight", tensors["model.norm.weight"]),
                       hp.rms_norm_eps, "model/norm")
    # Tied embeddings: the lm-head gets its own transposed copy so that the int4 pass can quantize
    # it while the embedding Gather keeps an fp32 table.
    lm_head = g.initializer("lm_head.weight_t", lm_head_weight(hp, tensors).T)
    if "lm_head.weight" in origins:
        g.linear_sources[lm_head] = origins["lm_head.weight"]
    g.node("MatMul", [normed, lm_head], "lm_head", outputs=["logits"])

    graph = helper.make_graph(g.nodes, "frognano_llama_decoder", graph_inputs, graph_outputs,
                              initializer=g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", ONNX_OPSET)],
                              producer_name="frognano_models")
    model.ir_version = ONNX_IR_VERSION
    helper.set_model_props(model, metadata)
    return model, g.linear_sources


def lm_head_weight(hp: LlamaHParams, tensors: dict[str, np.ndarray]) -> np.ndarray:
    """The lm-head weight [vocab, hidden]: the embedding table when tied (as transformers ties
    them, even if a checkpoint also stores lm_head.weight)."""
    return tensors["model.embed_tokens.weight" if hp.tie_word_embeddings else "lm_head.weight"]


# ----------------------------------------------------------------------------------------------
# Converter: ONNX graph, onnxruntime-genai builder layout
# ----------------------------------------------------------------------------------------------


def genai_cache_names(hp: LlamaHParams) -> tuple[list[str], list[str]]:
    """Cache input and output names in the builder's order: every layer's key, then every value."""
    layers = range(hp.num_hidden_layers)
    past = ([f"past_key_values.{i}.key" for i in layers] + [f"past_key_values.{i}.value" for i in layers])
    present = [f"present.{i}.key" for i in layers] + [f"present.{i}.value" for i in layers]
    return past, present


def build_genai_decoder_model(hp: LlamaHParams, tensors: dict[str, np.ndarray],
                              metadata: dict[str, str], origins: dict[str, LinearSource] | None = None):
    """Builds the fp32 decoder in onnxruntime-genai's builder layout (see the module docstring).

    Mirrors the builder's llama graph for the CPU execution provider and float32 I/O (builder
    0.18.0, `Model.make_model`): names of nodes, initializers and values are the builder's.
    Takes HF-named tensors in HF order and GGUF origins like build_decoder_model.
    Returns (model, linear_sources); a packed QKV weight's source is a tuple (q, k, v).
    """
    from onnx import TensorProto, helper, numpy_helper  # noqa: PLC0415

    origins = origins or {}
    heads, kv_heads, head_dim = hp.num_attention_heads, hp.num_key_value_heads, hp.head_dim
    layers = hp.num_hidden_layers
    nodes, initializers = [], []
    constants: set[str] = set()
    linear_sources: dict[str, LinearSource | tuple[LinearSource, ...]] = {}

    def node(op_type: str, inputs: list[str], outputs: list[str], name: str, domain: str | None = None,
             **attributes) -> str:
        nodes.append(helper.make_node(op_type, inputs, outputs, name=name, domain=domain, **attributes))
        return outputs[0]

    def constant(value) -> str:
        """An int64 Constant node named like the builder's (`/model/constants/INT64/[1]`)."""
        name = f"/model/constants/INT64/{value}"
        if name not in constants:
            constants.add(name)
            tensor = numpy_helper.from_array(np.array(value, dtype=np.int64), name)
            node("Constant", [], [name], name.replace("/constants/", "/constant_nodes/"), value=tensor)
        return name

    def initializer(name: str, array: np.ndarray) -> str:
        initializers.append(numpy_helper.from_array(np.ascontiguousarray(array, dtype=np.float32), name))
        return name

    def matmul(name: str, x: str, weight: np.ndarray, source, output: str | None = None) -> str:
        """A MatMul named like the builder's (`/model/.../MatMul`, weight `model....MatMul.weight`);
        weight is [out, in] (HF order)."""
        weight_name = initializer(name[1:].replace("/", ".") + ".weight", weight.T)
        if source is not None and (not isinstance(source, tuple) or None not in source):
            linear_sources[weight_name] = source
        return node("MatMul", [x, weight_name], [output or f"{name}/output_0"], name)

    batch, seq, past, total = ("batch_size", "sequence_length", "past_sequence_length",
                               "total_sequence_length")
    past_names, present_names = genai_cache_names(hp)
    graph_inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, [batch, seq]),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [batch, total]),
    ] + [helper.make_tensor_value_info(name, TensorProto.FLOAT, [batch, kv_heads, past, "kv_cache_dim"])
         for name in past_names]
    graph_outputs = [
        helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, seq, hp.vocab_size]),
    ] + [helper.make_tensor_value_info(name, TensorProto.FLOAT, [batch, kv_heads, total, "kv_cache_dim"])
         for name in present_names]

    # seqlens_k = sum(attention_mask) - 1 and total_sequence_length, both int32, for every layer.
    mask_base = "/model/attn_mask_reformat/attn_mask_subgraph"
    mask_sum = node("ReduceSum", ["attention_mask", constant([1])], [f"{mask_base}/ReduceSum/output_0"],
                    f"{mask_base}/ReduceSum", keepdims=0)
    seqlens = node("Sub", [mask_sum, constant([1])], [f"{mask_base}/Sub/output_0"], f"{mask_base}/Sub")
    seqlens_k = node("Cast", [seqlens], [f"{mask_base}/Sub/Cast/output_0"], f"{mask_base}/Sub/Cast",
                     to=TensorProto.INT32)
    mask_shape = node("Shape", ["attention_mask"], [f"{mask_base}/Shape/output_0"], f"{mask_base}/Shape")
    total_len = node("Gather", [mask_shape, constant(1)], [f"{mask_base}/Gather/output_0"],
                     f"{mask_base}/Gather", axis=0)
    total_seq_len = node("Cast", [total_len], [f"{mask_base}/Gather/Cast/output_0"],
                         f"{mask_base}/Gather/Cast", to=TensorProto.INT32)

    embed = initializer("model.embed_tokens.weight", tensors["model.embed_tokens.weight"])
    hidden = node("Gather", [embed, "input_ids"], ["/model/embed_tokens/Gather/output_0"],
                  "/model/embed_tokens/Gather")

    # The builder's caches hold cos/sin of the first head_dim / 2 frequencies (GQA rotates halves).
    cos_table, sin_signed_table = rotary_tables(hp)
    cos_cache = initializer("cos_cache", cos_table[:, :head_dim // 2])
    sin_cache = initializer("sin_cache", sin_signed_table[:, head_dim // 2:])

    def layernorm(layer: int, location: str, root: str, skip: str | None) -> tuple[str, str]:
        """RMSNorm of root + skip; returns (normalized, new residual stream). The first one is a
        SimplifiedLayerNormalization; the others are SkipSimplifiedLayerNormalization, which also
        adds the branch output (skip) to the residual stream (its output 3)."""
        base = f"/model/layers.{layer}/{location}_layernorm"
        weight_name = f"model.layers.{layer}.{location}_layernorm.weight"
        weight = initializer(weight_name, tensors[weight_name])
        if skip is None:
            return node("SimplifiedLayerNormalization", [root, weight], [f"{base}/output_0"],
                        f"{base}/LayerNorm", axis=-1, epsilon=hp.rms_norm_eps, stash_type=1), root
        node("SkipSimplifiedLayerNormalization", [root, skip, weight],
             [f"{base}/output_0", "", "", f"{base}/output_3"], f"{base}/SkipLayerNorm",
             domain="com.microsoft", epsilon=hp.rms_norm_eps)
        return f"{base}/output_0", f"{base}/output_3"

    root, skip = hidden, None  # residual stream, and the branch output still to be added to it
    for layer in range(layers):
        hf, base = f"model.layers.{layer}.", f"/model/layers.{layer}"

        # --- self attention: packed QKV -> GroupQueryAttention (rotary inside) -> o_proj
        normed, root = layernorm(layer, "input", root, skip)
        if any(f"{hf}self_attn.{proj}.bias" in tensors for proj in ("q_proj", "k_proj", "v_proj", "o_proj")):
            raise ConversionError("the genai layout does not support attention biases")
        qkv_names = [f"{hf}self_attn.{proj}.weight" for proj in ("q_proj", "k_proj", "v_proj")]
        qkv_weight = np.concatenate([tensors[name] for name in qkv_names], axis=0)
        qkv = matmul(f"{base}/attn/qkv_proj/MatMul", normed, qkv_weight,
                     tuple(origins.get(name) for name in qkv_names))
        attention = node(
            "GroupQueryAttention",
            [qkv, "", "", f"past_key_values.{layer}.key", f"past_key_values.{layer}.value", seqlens_k,
             total_seq_len, cos_cache, sin_cache, "", "", ""],
            [f"{base}/attn/GroupQueryAttention/output_0", f"present.{layer}.key", f"present.{layer}.value"],
            f"{base}/attn/GroupQueryAttention", domain="com.microsoft",
            num_heads=heads, kv_num_heads=kv_heads, scale=float(1.0 / np.sqrt(head_dim)),
            local_window_size=-1, softcap=0.0, do_rotary=1, rotary_interleaved=0)
        skip = matmul(f"{base}/attn/o_proj/MatMul", attention, tensors[hf + "self_attn.o_proj.weight"],
                      origins.get(hf + "self_attn.o_proj.weight"))

        # --- SiLU-gated MLP
        normed, root = layernorm(layer, "post_attention", root, skip)
        gate = matmul(f"{base}/mlp/gate_proj/MatMul", normed, tensors[hf + "mlp.gate_proj.weight"],
                      origins.get(hf + "mlp.gate_proj.weight"))
        up = matmul(f"{base}/mlp/up_proj/MatMul", normed, tensors[hf + "mlp.up_proj.weight"],
                    origins.get(hf + "mlp.up_proj.weight"))
        sigmoid = node("Sigmoid", [gate], [f"{base}/mlp/act_fn/Sigmoid/output_0"],
                       f"{base}/mlp/act_fn/Sigmoid")
        silu = node("Mul", [gate, sigmoid], [f"{base}/mlp/act_fn/Mul/output_0"], f"{base}/mlp/act_fn/Mul")
        gated = node("Mul", [silu, up], [f"{base}/mlp/Mul/output_0"], f"{base}/mlp/Mul")
        skip = matmul(f"{base}/mlp/down_proj/MatMul", gated, tensors[hf + "mlp.down_proj.weight"],
                      origins.get(hf + "mlp.down_proj.weight"))

    # Final norm: the last SkipSimplifiedLayerNormalization, without the residual output.
    final_base = f"/model/layers.{layers}/final_norm_layernorm"
    final_weight = initializer(f"model.layers.{layers}.final_norm_layernorm.weight",
                               tensors["model.norm.weight"])
    normed = node("SkipSimplifiedLayerNormalization", [root, skip, final_weight], [f"{final_base}/output_0"],
                  f"{final_base}/SkipLayerNorm", domain="com.microsoft", epsilon=hp.rms_norm_eps)
    matmul("/lm_head/MatMul", normed, lm_head_weight(hp, tensors), origins.get("lm_head.weight"),
           output="logits")

    graph = helper.make_graph(nodes, "main_graph", graph_inputs, graph_outputs, initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", GENAI_ONNX_OPSET),
                                                    helper.make_opsetid("com.microsoft", 1)],
                              producer_name="frognano_models")
    model.ir_version = GENAI_ONNX_IR_VERSION
    helper.set_model_props(model, metadata)
    return model, linear_sources


def quantize_int4_rtn(model):
    """int4 method "rtn": onnxruntime's MatMulNBitsQuantizer over the fp32 weights.

    Every constant-weight MatMul (incl. the lm-head) is re-rounded to 4 bits (block 32,
    asymmetric, integer zero points, accuracy_level 4).
    """
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer  # noqa: PLC0415

    # The quantizer logs one INFO line per node; keep stderr to our own progress lines.
    logging.getLogger("onnxruntime.quantization.matmul_nbits_quantizer").setLevel(logging.WARNING)
    quantizer = MatMulNBitsQuantizer(model, block_size=INT4_BLOCK_SIZE, is_symmetric=INT4_IS_SYMMETRIC,
                                     accuracy_level=INT4_ACCURACY_LEVEL)
    quantizer.process()
    return quantizer.model.model


@dataclass
class NBitsWeight:
    """A MatMulNBits weight (block size 32) whose dequantized values equal a GGUF tensor's."""

    bits: int                     # 4 or 8
    packed: np.ndarray            # uint8 [N, blocks, 32 * bits / 8]
    scales: np.ndarray            # float32 [N * blocks]
    zero_points: np.ndarray       # uint8; 4 bits: [N, ceil(blocks / 2)] two per byte; 8 bits: [N, blocks]
    residual: np.ndarray | None   # float32 [blocks, N]: what the integer zero points miss, or None


def _fp16_field(blocks: np.ndarray, offset: int) -> np.ndarray:
    return blocks[..., offset:offset + 2].copy().view(np.float16)[..., 0].astype(np.float32)


def _low_then_high_nibbles(quants: np.ndarray) -> np.ndarray:
    """ggml Q4 blocks store element j in the low nibble of byte j and element 16 + j in its high one."""
    return np.concatenate([quants & 0x0F, quants >> 4], axis=-1)


def gguf_tensor_to_nbits(tensor, source: LinearSource) -> NBitsWeight | None:
    """Carries a GGUF Q4_0 / Q4_1 / Q8_0 tensor's blocks into MatMulNBits without re-rounding.

    Both formats use blocks of 32 consecutive input elements, so the GGUF codes are reused as is.
    Q4_0 (d * (q - 8)) and Q8_0 (d * q) map exactly onto 4- and 8-bit blocks with integer zero
    points 8 and 128. Q4_1 (d * q + m) has a float minimum m; with zp = round(-m / d) the blocks
    hold d * (q - zp) and the remainder r = d * zp + m is one constant per block, so
    x @ W^T = MatMulNBits(x) + block_sums(x) @ residual, which the graph adds back exactly.
    Returns None for other tensor types.
    """
    quant = _gguf().GGMLQuantizationType
    data = np.asarray(tensor.data)
    rows = data.shape[0]
    minimum = None
    if tensor.tensor_type == quant.Q8_0:
        blocks = data.reshape(rows, -1, 34)
        scales = _fp16_field(blocks, 0)
        codes = (blocks[..., 2:].copy().view(np.int8).astype(np.int16) + 128).astype(np.uint8)
        zero_points = np.full(scales.shape, 128, dtype=np.uint8)
        bits = 8
    elif tensor.tensor_type == quant.Q4_0:
        blocks = data.reshape(rows, -1, 18)
        scales = _fp16_field(blocks, 0)
        codes = _low_then_high_nibbles(blocks[..., 2:])
        zero_points = np.full(scales.shape, 8, dtype=np.uint8)
        bits = 4
    elif tensor.tensor_type == quant.Q4_1:
        blocks = data.reshape(rows, -1, 20)
        scales, minimum = _fp16_field(blocks, 0), _fp16_field(blocks, 2)
        codes = _low_then_high_nibbles(blocks[..., 4:])
        safe_scales = np.where(scales == 0, 1.0, scales)
        zero_points = np.clip(np.round(-minimum / safe_scales), 0, 15).astype(np.uint8)
        bits = 4
    else:
        return None
    if source.rotary_heads:
        # The same row order as the fp32 path, by sending row indices through it.
        order = gguf_rows_to_rotate_half_rows(np.arange(rows)[:, None], source.rotary_heads)[:, 0]
        codes, scales, zero_points = codes[order], scales[order], zero_points[order]
        minimum = None if minimum is None else minimum[order]
    residual = None
    if minimum is not None:
        residual = np.ascontiguousarray(((scales * zero_points + minimum) * source.scale).T)
    scales = (scales * np.float32(source.scale)).astype(np.float32)
    if bits == 4:
        packed = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)
        block_count = zero_points.shape[1]
        padded = np.zeros((rows, block_count + block_count % 2), dtype=np.uint8)
        padded[:, :block_count] = zero_points
        zero_points = (padded[:, 0::2] | (padded[:, 1::2] << 4)).astype(np.uint8)
    else:
        packed = codes
    return NBitsWeight(bits, np.ascontiguousarray(packed), scales.reshape(-1),
                       np.ascontiguousarray(zero_points), residual)


def packed_nbits(gguf_tensors: dict, source: LinearSource | tuple[LinearSource, ...]) -> NBitsWeight | None:
    """The MatMulNBits weight of a linear source; a tuple of sources (the genai layout's packed
    QKV projection) concatenates its parts' output rows. None when some part has no GGUF blocks
    or the parts' bit widths differ."""
    if isinstance(source, LinearSource):
        return gguf_tensor_to_nbits(gguf_tensors[source.gguf_name], source)
    parts = [gguf_tensor_to_nbits(gguf_tensors[part.gguf_name], part) for part in source]
    if any(part is None for part in parts) or len({part.bits for part in parts}) != 1:
        return None
    residual = None
    if any(part.residual is not None for part in parts):
        residual = np.ascontiguousarray(np.concatenate([
            part.residual if part.residual is not None
            else np.zeros((part.packed.shape[1], part.packed.shape[0]), dtype=np.float32)
            for part in parts], axis=1))
    return NBitsWeight(parts[0].bits, np.concatenate([part.packed for part in parts], axis=0),
                       np.concatenate([part.scales for part in parts]),
                       np.concatenate([part.zero_points for part in parts], axis=0), residual)


def quantize_int4_from_gguf(model, reader, linear_sources: dict, naming: str = "frognano"):
    """int4 method "gguf": every MatMul whose weight came from a Q4_0/Q4_1/Q8_0 GGUF tensor becomes
    a MatMulNBits over that tensor's own blocks (see gguf_tensor_to_nbits), so the int4 model
    computes the GGUF's weights exactly (activations still go through int8, accuracy_level 4).
    SmolLM2's tied Q8_0 lm-head thus becomes an 8-bit MatMulNBits. MatMuls over other tensor
    types are left to quantize_int4_rtn. naming "builder" names the new nodes and initializers
    like onnxruntime's MatMulNBitsQuantizer does (the genai layout); "frognano" is the optimum
    layout's naming.
    """
    from onnx import helper, numpy_helper  # noqa: PLC0415

    gguf_tensors = {tensor.name: tensor for tensor in reader.tensors}
    graph = model.graph
    nodes, initializers, replaced = [], [], set()
    block_sums: dict[str, str] = {}
    shared: dict[str, str] = {}

    def add_initializer(name: str, array: np.ndarray) -> str:
        initializers.append(numpy_helper.from_array(array, name))
        return name

    def constant(name: str, values: list[int]) -> str:
        if name not in shared:
            if naming == "builder":
                # A Constant node, as the builder makes its constants: all initializers go to the
                # external data file, where load-time shape inference cannot read a Reshape shape.
                shared[name] = f"/model/constants/INT64/{values}"
                nodes.append(helper.make_node(
                    "Constant", [], [shared[name]], name=f"/model/constant_nodes/INT64/{values}",
                    value=numpy_helper.from_array(np.asarray(values, dtype=np.int64), shared[name])))
            else:
                shared[name] = add_initializer(name, np.asarray(values, dtype=np.int64))
        return shared[name]

    for node in graph.node:
        source = linear_sources.get(node.input[1]) if node.op_type == "MatMul" else None
        weight = packed_nbits(gguf_tensors, source) if source else None
        if weight is None:
            nodes.append(node)
            continue
        activation, weight_name, output = node.input[0], node.input[1], node.output[0]
        out_features, block_count = weight.packed.shape[0], weight.packed.shape[1]
        if naming == "builder":  # MatMulNBitsQuantizer's names
            nbits_name = f"{node.name}_Q{weight.bits}"
            packed_name, scales_name, zero_points_name = (
                f"{weight_name}_Q{weight.bits}", f"{weight_name}_scales", f"{weight_name}_zero_points")
            nbits_output = output if weight.residual is None else f"{nbits_name}/output_0"
        else:
            nbits_name = f"{node.name}/nbits"
            packed_name, scales_name, zero_points_name = (
                f"{weight_name}/nbits", f"{weight_name}/scales", f"{weight_name}/zero_points")
            nbits_output = output if weight.residual is None else f"{node.name}/nbits_out"
        nodes.append(helper.make_node(
            "MatMulNBits",
            [activation, add_initializer(packed_name, weight.packed),
             add_initializer(scales_name, weight.scales),
             add_initializer(zero_points_name, weight.zero_points)],
            [nbits_output], name=nbits_name, domain="com.microsoft",
            K=block_count * INT4_BLOCK_SIZE, N=out_features, bits=weight.bits,
            block_size=INT4_BLOCK_SIZE, accuracy_level=INT4_ACCURACY_LEVEL))
        if weight.residual is not None:
            if activation not in block_sums:  # shared by q/k/v and by gate/up
                blocked = f"{activation}/blocks"
                shape = constant(f"int4/block_shape_{block_count}", [0, 0, block_count, INT4_BLOCK_SIZE])
                nodes.append(helper.make_node("Reshape", [activation, shape], [blocked], name=blocked))
                block_sums[activation] = f"{activation}/block_sums"
                nodes.append(helper.make_node("ReduceSum", [blocked, constant("int4/last_axis", [-1])],
                                              [block_sums[activation]], name=block_sums[activation],
                                              keepdims=0))
            correction = f"{node.name}/zero_point_correction"
            residual = add_initializer(f"{weight_name}_residual" if naming == "builder"
                                       else f"{weight_name}/residual", weight.residual)
            nodes.append(helper.make_node("MatMul", [block_sums[activation], residual], [correction],
                                          name=correction))
            nodes.append(helper.make_node("Add", [nbits_output, correction], [output],
                                          name=f"{node.name}/corrected"))
        replaced.add(weight_name)

    kept = [init for init in graph.initializer if init.name not in replaced]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.initializer[:]
    graph.initializer.extend(kept + initializers)
    if not any(opset.domain == "com.microsoft" for opset in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    if any(node.op_type == "MatMul" and node.input[1] in linear_sources for node in graph.node):
        model = quantize_int4_rtn(model)
    return model


def save_onnx(model, path: Path) -> list[Path]:
    """Saves a model with its weights in one external data file `<name>.data` next to it (small
    tensors, such as shape constants, stay in the graph). ONNX Runtime maps external weights from
    the file instead of parsing them out of the protobuf, which lowers the peak memory of loading
    by about the model's size (fp32 SmolLM2: 905 -> 669 MB). model is left unchanged."""
    return _save_external(model, path, size_threshold=1024)


def save_onnx_with_external_data(model, path: Path) -> list[Path]:
    """Saves a model like onnxruntime-genai's builder: every initializer in one external data file
    `<name>.data` next to it (small Constant nodes stay in the graph). model is left unchanged."""
    return _save_external(model, path, size_threshold=0)


def _save_external(model, path: Path, size_threshold: int) -> list[Path]:
    import onnx  # noqa: PLC0415

    data_path = path.with_name(path.name + ".data")
    if data_path.exists():
        data_path.unlink()  # onnx appends to an existing data file
    copy = onnx.ModelProto()
    copy.CopyFrom(model)  # saving moves the tensors' bytes out of the proto it is given
    onnx.save_model(copy, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=data_path.name, size_threshold=size_threshold)
    data_path.chmod(path.stat().st_mode & 0o777)  # onnx creates it owner-only
    return [path, data_path]


# ----------------------------------------------------------------------------------------------
# Tokenizer
# ----------------------------------------------------------------------------------------------


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map used by byte-level BPE."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
                 + list(range(ord("®"), ord("ÿ") + 1)))
    mapping, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            mapping[byte] = chr(byte)
        else:
            mapping[byte] = chr(256 + extra)
            extra += 1
    return mapping


@dataclass
class GgufVocabulary:
    """The tokenizer part of a GGUF's metadata."""

    tokens: list[str]
    token_types: list[int]
    merges: list[str]
    bos_id: int | None
    eos_id: int | None
    unk_id: int | None
    pad_id: int | None
    chat_template: str | None
    add_bos: bool

    @classmethod
    def from_reader(cls, reader) -> GgufVocabulary:
        model = gguf_field(reader, "tokenizer.ggml.model")
        if model != "gpt2":
            raise ValueError(f"unsupported tokenizer model {model!r} (only byte-level BPE 'gpt2')")
        pre = gguf_field(reader, "tokenizer.ggml.pre", "default")
        if pre != "smollm":
            # Other pre-tokenizers need other split regexes; refuse rather than mis-tokenize.
            raise ValueError(f"unsupported pre-tokenizer {pre!r} (only 'smollm')")

        def optional_id(key):
            value = gguf_field(reader, key)
            return None if value is None else int(value)

        return cls(
            tokens=list(gguf_field(reader, "tokenizer.ggml.tokens")),
            token_types=[int(t) for t in gguf_field(reader, "tokenizer.ggml.token_type")],
            merges=list(gguf_field(reader, "tokenizer.ggml.merges")),
            bos_id=optional_id("tokenizer.ggml.bos_token_id"),
            eos_id=optional_id("tokenizer.ggml.eos_token_id"),
            unk_id=optional_id("tokenizer.ggml.unknown_token_id"),
            pad_id=optional_id("tokenizer.ggml.padding_token_id"),
            chat_template=gguf_field(reader, "tokenizer.chat_template"),
            add_bos=bool(gguf_field(reader, "tokenizer.ggml.add_bos_token", False)),
        )

    def token(self, token_id: int | None) -> str | None:
        return None if token_id is None else self.tokens[token_id]

    def added_token_ids(self) -> list[int]:
        return [i for i, kind in enumerate(self.token_types)
                if kind in (TOKEN_TYPE_CONTROL, TOKEN_TYPE_USER_DEFINED)]


def tokenizer_json(vocab: GgufVocabulary) -> dict:
    """HF `tokenizers` JSON for a GGUF byte-level BPE vocabulary with the smollm pre-tokenizer."""
    if len(set(vocab.tokens)) != len(vocab.tokens):
        raise ValueError("duplicate tokens in the GGUF vocabulary")
    for merge in vocab.merges:
        if merge.count(" ") != 1:
            raise ValueError(f"merge {merge!r} is not two space-separated tokens")
    added = [{
        "id": i, "content": vocab.tokens[i], "single_word": False, "lstrip": False, "rstrip": False,
        "normalized": False, "special": vocab.token_types[i] == TOKEN_TYPE_CONTROL,
    } for i in vocab.added_token_ids()]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": DIGIT_SPLIT_REGEX}, "behavior": "Isolated",
             "invert": False},
            {"type": "Split", "pattern": {"Regex": GPT2_SPLIT_REGEX}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        ]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
            "vocab": {token: i for i, token in enumerate(vocab.tokens)},
            # "a b" strings: the merge format every tokenizers version reads.
            "merges": list(vocab.merges),
        },
    }


# \s as the regex engines see it (Unicode White_Space); str.isspace() also accepts \x1c-\x1f.
_WHITESPACE = frozenset("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
                        "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
_CONTRACTIONS = ("s", "t", "re", "ve", "m", "ll", "d")


def _is_letter(char: str) -> bool:
    return unicodedata.category(char)[0] == "L"


def _is_number(char: str) -> bool:
    return unicodedata.category(char)[0] == "N"


def _is_other(char: str) -> bool:
    return not (char in _WHITESPACE or _is_letter(char) or _is_number(char))


def gpt2_split(text: str) -> list[str]:
    """Hand-written matcher for GPT2_SPLIT_REGEX (the standard library `re` has no \\p{L}).

    Alternatives are tried in the regex's order at every position, so the pieces are the same.
    """
    pieces, i, n = [], 0, len(text)
    while i < n:
        char = text[i]
        if char == "'":
            suffix = next((s for s in _CONTRACTIONS if text.startswith(s, i + 1)), None)
            if suffix is not None:
                pieces.append(text[i:i + 1 + len(suffix)])
                i += 1 + len(suffix)
                continue
        start = i + 1 if char == " " and i + 1 < n else i
        matched = False
        for char_class in (_is_letter, _is_number, _is_other):
            if char_class(text[start]):
                end = start + 1
                while end < n and char_class(text[end]):
                    end += 1
                pieces.append(text[i:end])
                i, matched = end, True
                break
        if matched:
            continue
        # Here text[i] is whitespace: \s+(?!\S) keeps the last space for the next word, \s+ else.
        end = i
        while end < n and text[end] in _WHITESPACE:
            end += 1
        if end < n and end - i > 1:
            end -= 1
        pieces.append(text[i:end])
        i = end
    return pieces


def pretokenize(text: str) -> list[str]:
    """The smollm pre-tokenizer: isolate numeric characters, then the GPT-2 split."""
    pieces, run_start = [], 0
    for index, char in enumerate(text):
        if _is_number(char):
            if run_start < index:
                pieces.extend(gpt2_split(text[run_start:index]))
            pieces.append(char)
            run_start = index + 1
    if run_start < len(text):
        pieces.extend(gpt2_split(text[run_start:]))
    return pieces


class ByteLevelBpeTokenizer:
    """A small, independent byte-level BPE tokenizer over a tokenizer.json (smollm layout).

    Used by `check` and `generate`, and as a cross-check of the `tokenizers` library's reading of
    the same file. Added tokens are matched literally (longest first) before pre-tokenization.
    """

    def __init__(self, vocab: dict[str, int], merges: list[str], added_tokens: dict[str, int]):
        self.vocab = vocab
        self.id_to_token = {i: token for token, i in vocab.items()}
        self.id_to_token.update({i: token for token, i in added_tokens.items()})
        self.merge_rank = {tuple(merge.split(" ")): rank for rank, merge in enumerate(merges)}
        self.added_tokens = added_tokens
        self.byte_to_char = bytes_to_unicode()
        self.char_to_byte = {char: byte for byte, char in self.byte_to_char.items()}
        ordered = sorted(added_tokens, key=len, reverse=True)
        self._added_pattern = (re.compile("(" + "|".join(map(re.escape, ordered)) + ")")
                               if ordered else None)
        self._cache: dict[str, list[int]] = {}

    @classmethod
    def from_file(cls, path: Path) -> ByteLevelBpeTokenizer:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        merges = [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]
        added = {entry["content"]: entry["id"] for entry in data.get("added_tokens", [])}
        return cls(data["model"]["vocab"], merges, added)

    def _bpe(self, piece: str) -> list[int]:
        cached = self._cache.get(piece)
        if cached is not None:
            return cached
        symbols = [self.byte_to_char[b] for b in piece.encode("utf-8")]
        while len(symbols) > 1:
            # The lowest-ranked adjacent pair (leftmost on ties) is merged next.
            rank, position = min((self.merge_rank.get(pair, math.inf), index)
                                 for index, pair in enumerate(zip(symbols, symbols[1:], strict=False)))
            if rank == math.inf:
                break
            first, second = symbols[position], symbols[position + 1]
            merged, index = [], 0
            while index < len(symbols):  # merge every occurrence of this pair, left to right
                if index + 1 < len(symbols) and symbols[index] == first and symbols[index + 1] == second:
                    merged.append(first + second)
                    index += 2
                else:
                    merged.append(symbols[index])
                    index += 1
            symbols = merged
        ids = [self.vocab[symbol] for symbol in symbols]
        self._cache[piece] = ids
        return ids

    def encode(self, text: str) -> list[int]:
        """Token ids for text; added/special tokens written in the text are recognised."""
        segments = self._added_pattern.split(text) if self._added_pattern else [text]
        ids: list[int] = []
        for index, segment in enumerate(segments):
            if index % 2 == 1:
                ids.append(self.added_tokens[segment])
            elif segment:
                for piece in pretokenize(segment):
                    ids.extend(self._bpe(piece))
        return ids

    def decode(self, ids: list[int]) -> str:
        data = bytearray()
        for token_id in ids:
            token = self.id_to_token[token_id]
            if token in self.added_tokens:
                data.extend(token.encode("utf-8"))
            else:
                data.extend(self.char_to_byte[char] for char in token)
        return data.decode("utf-8", errors="replace")


def default_system_prompt(chat_template: str | None) -> str | None:
    """The system message a ChatML template inserts when none is given (SmolLM2's does), if any."""
    match = re.search(r"<\|im_start\|>system\n(.*?)<\|im_end\|>", chat_template or "", re.DOTALL)
    return match.group(1) if match else None


def render_chatml(messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
    """ChatML as the GGUF templates render it when a system message is given."""
    text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")


# ----------------------------------------------------------------------------------------------
# Converter: model folder
# ----------------------------------------------------------------------------------------------


def _model_configs(hp: LlamaHParams, vocab: GgufVocabulary, precision: str, source: Path,
                   source_sha256: str, layout: str = "optimum") -> dict[str, dict]:
    """config.json, generation_config.json, tokenizer_config.json and genai_config.json."""
    eos_ids = [vocab.eos_id] if vocab.eos_id is not None else []
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_act": "silu",
        "num_hidden_layers": hp.num_hidden_layers,
        "num_attention_heads": hp.num_attention_heads,
        "num_key_value_heads": hp.num_key_value_heads,
        "hidden_size": hp.hidden_size,
        "head_dim": hp.head_dim,
        "intermediate_size": hp.intermediate_size,
        "vocab_size": hp.vocab_size,
        "max_position_embeddings": hp.max_position_embeddings,
        "rope_theta": hp.rope_theta,
        "rope_scaling": None,
        "rms_norm_eps": hp.rms_norm_eps,
        "attention_bias": False,
        "mlp_bias": False,
        "bos_token_id": vocab.bos_id,
        "eos_token_id": vocab.eos_id,
        "tie_word_embeddings": hp.tie_word_embeddings,
        "use_cache": True,
        "dtype": "float32",
        "frognano": {"precision": precision, "source": source.name, "source_sha256": source_sha256},
    }
    generation = {"bos_token_id": vocab.bos_id, "eos_token_id": vocab.eos_id}
    if vocab.pad_id is not None:
        config["pad_token_id"] = vocab.pad_id
        generation["pad_token_id"] = vocab.pad_id
    special = [vocab.tokens[i] for i in vocab.added_token_ids()
               if vocab.token_types[i] == TOKEN_TYPE_CONTROL]
    tokenizer_config = {
        "tokenizer_class": "GPT2Tokenizer",
        "add_bos_token": False,
        "add_eos_token": False,
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
        "bos_token": vocab.token(vocab.bos_id),
        "eos_token": vocab.token(vocab.eos_id),
        "pad_token": vocab.token(vocab.pad_id),
        "unk_token": vocab.token(vocab.unk_id),
        "additional_special_tokens": special,
        "added_tokens_decoder": {str(i): {
            "content": vocab.tokens[i], "lstrip": False, "normalized": False, "rstrip": False,
            "single_word": False, "special": vocab.token_types[i] == TOKEN_TYPE_CONTROL,
        } for i in vocab.added_token_ids()},
        "model_max_length": hp.max_position_embeddings,
        "chat_template": vocab.chat_template,
    }
    # Standard graph: past and present are separate tensors that grow every step.
    genai = _genai_config(hp, vocab, bos=vocab.bos_id, eos=eos_ids, position_ids=True,
                          share_buffer=False, top_k=1)
    if layout == "genai":
        config["frognano"]["layout"] = "genai"
        genai = _genai_layout_genai_config(hp, vocab)
    return {"config.json": config, "generation_config.json": generation,
            "tokenizer_config.json": tokenizer_config, "genai_config.json": genai}


def _genai_layout_genai_config(hp: LlamaHParams, vocab: GgufVocabulary) -> dict:
    """genai_config.json as onnxruntime-genai's builder (0.18.0, `make_genai_config`) writes it
    for this graph on CPU: no position_ids, past and present share one max-length buffer (GQA),
    search defaults from a generation_config.json that names only the special tokens (so top_k
    is the builder's default 50; do_sample false makes search greedy anyway)."""
    eos = vocab.eos_id if vocab.eos_id is not None else []
    bos = vocab.bos_id if vocab.bos_id is not None else 1
    return _genai_config(hp, vocab, bos=bos, eos=eos, position_ids=False, share_buffer=True,
                         top_k=50)


def _genai_config(hp: LlamaHParams, vocab: GgufVocabulary, *, bos, eos, position_ids: bool,
                  share_buffer: bool, top_k: int) -> dict:
    """genai_config.json of a graph: `position_ids` says whether it takes them, `share_buffer`
    whether past and present share one max-length buffer; `top_k` is the search default."""
    return {
        "model": {
            "bos_token_id": bos,
            "context_length": hp.max_position_embeddings,
            "decoder": {
                "session_options": {"log_id": "onnxruntime-genai", "provider_options": []},
                "filename": "model.onnx",
                "head_size": hp.head_dim,
                "hidden_size": hp.hidden_size,
                "inputs": {
                    "input_ids": "input_ids",
                    "attention_mask": "attention_mask",
                    **({"position_ids": "position_ids"} if position_ids else {}),
                    "past_key_names": "past_key_values.%d.key",
                    "past_value_names": "past_key_values.%d.value",
                },
                "outputs": {
                    "logits": "logits",
                    "present_key_names": "present.%d.key",
                    "present_value_names": "present.%d.value",
                },
                "num_attention_heads": hp.num_attention_heads,
                "num_hidden_layers": hp.num_hidden_layers,
                "num_key_value_heads": hp.num_key_value_heads,
            },
            "eos_token_id": eos,
            "pad_token_id": vocab.pad_id if vocab.pad_id is not None else vocab.eos_id,
            "type": hp.model_type,
            "vocab_size": hp.vocab_size,
        },
        "search": {
            "diversity_penalty": 0.0, "do_sample": False, "early_stopping": True,
            "length_penalty": 1.0, "max_length": hp.max_position_embeddings, "min_length": 0,
            "no_repeat_ngram_size": 0, "num_beams": 1, "num_return_sequences": 1,
            "past_present_share_buffer": share_buffer,
            "repetition_penalty": 1.0, "temperature": 1.0, "top_k": top_k, "top_p": 1.0,
        },
    }


def layout_folder(layout: str, precision: str) -> str:
    """Model folder name of a layout and precision: `fp32`, `int4`, `genai-fp32`, `genai-int4`."""
    return precision if layout == "optimum" else f"{layout}-{precision}"


def parse_layouts(text: str) -> list[str]:
    """'optimum', 'genai', 'all' or a comma list of layouts -> layouts in LAYOUTS order."""
    names = set(LAYOUTS) if text == "all" else {name.strip() for name in text.split(",") if name.strip()}
    if not names or names - set(LAYOUTS):
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)} or all (got {text!r})")
    return [layout for layout in LAYOUTS if layout in names]


def convert(gguf_path: Path, out_dir: Path, precisions: list[str], int4_method: str = "gguf",
            layouts: list[str] | tuple[str, ...] = ("optimum",)) -> dict:
    """Converts a llama GGUF into one model folder per layout and precision under out_dir
    (see layout_folder)."""
    gguf = _gguf()
    started = time.perf_counter()
    unknown = set(precisions) - {"fp32", "int4"}
    if unknown or not precisions:
        raise ValueError(f"precisions must be a non-empty subset of fp32,int4 (got {precisions})")
    if int4_method not in INT4_METHODS:
        raise ValueError(f"int4 method must be one of {INT4_METHODS} (got {int4_method!r})")
    if not layouts or set(layouts) - set(LAYOUTS):
        raise ValueError(f"layouts must be a non-empty subset of {LAYOUTS} (got {layouts})")
    log(f"reading {gguf_path}")
    source_sha256 = sha256_of_file(gguf_path)
    reader = gguf.GGUFReader(str(gguf_path))
    hp = read_hparams(reader)
    vocab = GgufVocabulary.from_reader(reader)
    if len(vocab.tokens) != hp.vocab_size:
        raise ValueError(f"{len(vocab.tokens)} tokens but vocab_size {hp.vocab_size}")
    log(f"{hp.num_hidden_layers} layers, hidden {hp.hidden_size}, heads {hp.num_attention_heads}/"
        f"{hp.num_key_value_heads}, vocab {hp.vocab_size}; dequantizing")
    tensors, origins = gguf_to_hf_tensors(hp, dequantized_tensors(reader))
    tokenizer = tokenizer_json(vocab)
    files: dict[str, int] = {}
    for layout in LAYOUTS:
        if layout not in layouts:
            continue
        metadata = {"frognano.source": gguf_path.name, "frognano.source_sha256": source_sha256}
        if layout == "optimum":
            log("building the fp32 graph")
            model, linear_sources = build_decoder_model(hp, tensors, metadata, origins)
        else:
            log("building the fp32 graph (onnxruntime-genai builder layout)")
            metadata["frognano.layout"] = layout
            model, linear_sources = build_genai_decoder_model(hp, tensors, metadata, origins)
        # fp32 first: the int4 pass rewrites the same ModelProto in place.
        for precision in ("fp32", "int4"):
            if precision not in precisions:
                continue
            if precision == "int4":
                log(f"MatMul weights -> MatMulNBits (int4 method {int4_method!r})")
                if int4_method == "gguf":
                    model = quantize_int4_from_gguf(model, reader, linear_sources,
                                                    naming="frognano" if layout == "optimum" else "builder")
                else:
                    model = quantize_int4_rtn(model)
                _set_model_prop(model, "frognano.int4_method", int4_method)
            folder = out_dir / layout_folder(layout, precision)
            folder.mkdir(parents=True, exist_ok=True)
            _set_model_prop(model, "frognano.precision", precision)
            if layout == "optimum":
                written = save_onnx(model, folder / "model.onnx")
            else:
                written = save_onnx_with_external_data(model, folder / "model.onnx")
            configs = _model_configs(hp, vocab, precision, gguf_path, source_sha256, layout)
            if precision == "int4":
                configs["config.json"]["frognano"]["int4_method"] = int4_method
            configs["tokenizer.json"] = tokenizer
            for name, content in configs.items():
                written.append(_write_json(folder / name, content))
            if layout == "optimum" and precision == "fp32":
                # The fp32 folder doubles as a HF checkpoint (config.json is a LlamaConfig).
                written.append(write_hf_safetensors(folder / HF_WEIGHT_FILE, hp, tensors))
            for path in written:
                files[str(path)] = path.stat().st_size
            onnx_bytes = sum(path.stat().st_size for path in written if path.name.startswith("model.onnx"))
            log(f"wrote {folder} (model.onnx {onnx_bytes / 1e6:.1f} MB)")
        del model
    del tensors
    return {"command": "convert", "gguf": str(gguf_path), "out": str(out_dir),
            "layouts": [layout for layout in LAYOUTS if layout in layouts],
            "precisions": [p for p in ("fp32", "int4") if p in precisions],
            "int4_method": int4_method if "int4" in precisions else None, "files": files,
            "seconds": round(time.perf_counter() - started, 2)}


# ----------------------------------------------------------------------------------------------
# Hugging Face checkpoints -> model folders (from-hf, export_onnx)
# ----------------------------------------------------------------------------------------------


def _write_json(path: Path, content) -> Path:
    path.write_text(json.dumps(content, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def write_hf_safetensors(path: Path, hp: LlamaHParams, tensors: dict[str, np.ndarray]) -> Path:
    """model.safetensors of a fp32 folder: the HF-named, HF-order fp32 tensors the graph was built
    from (lm_head.weight only when the embeddings are untied), loadable by transformers."""
    return write_safetensors(path, {name: tensors[name] for name in hf_tensor_shapes(hp)})


@dataclass(frozen=True)
class SpecialIds:
    """The special token ids _genai_config reads (duck-typing GgufVocabulary's)."""

    bos_id: int | None
    eos_id: int | None
    pad_id: int | None


def _first_id(value) -> int | None:
    if isinstance(value, list):
        return int(value[0]) if value else None
    return None if value is None else int(value)


def _hf_folder_configs(config: dict, hp: LlamaHParams, precision: str, generation: dict,
                       source: dict) -> dict[str, dict]:
    """config.json (the checkpoint's, normalised: head_dim, fp32, our context length and the
    "frognano" block), generation_config.json and genai_config.json of a model folder."""
    out = {key: value for key, value in config.items()
           if key not in ("quantization_config", "torch_dtype", "_name_or_path", "frognano")}
    out.update({"architectures": [HF_ARCHITECTURES[hp.model_type]], "model_type": hp.model_type,
                "num_key_value_heads": hp.num_key_value_heads, "head_dim": hp.head_dim,
                "max_position_embeddings": hp.max_position_embeddings,
                "tie_word_embeddings": hp.tie_word_embeddings, "use_cache": True, "dtype": "float32",
                "frognano": {"precision": precision, **source}})
    eos = generation.get("eos_token_id", config.get("eos_token_id"))
    pad = _first_id(generation.get("pad_token_id", config.get("pad_token_id")))
    ids = SpecialIds(_first_id(generation.get("bos_token_id", config.get("bos_token_id"))),
                     _first_id(eos), pad)
    eos_list = eos if isinstance(eos, list) else ([] if eos is None else [eos])
    genai = _genai_config(hp, ids, bos=ids.bos_id, eos=eos_list, position_ids=True,
                          share_buffer=False, top_k=1)
    return {"config.json": out, "generation_config.json": generation, "genai_config.json": genai}


def _tokenizer_sources(tokenizer_from: Path | None, fallback_folders: list[Path]) -> list[Path]:
    """The tokenizer files to copy into a model folder: from tokenizer_from (both of
    TOKENIZER_FILES required), else from an existing folder being replaced."""
    if tokenizer_from is None:
        folder = next((f for f in fallback_folders if all((f / n).is_file() for n in TOKENIZER_FILES)),
                      None)
        if folder is None:
            raise ConversionError("no tokenizer: pass tokenizer_from (a folder with "
                                  f"{' and '.join(TOKENIZER_FILES)})")
    else:
        folder = Path(tokenizer_from)
        for name in TOKENIZER_FILES:
            if not (folder / name).is_file():
                raise ConversionError(f"{folder} has no {name} (a model folder needs "
                                      f"{' and '.join(TOKENIZER_FILES)})")
    return [folder / name for name in TOKENIZER_FILES + OPTIONAL_TOKENIZER_FILES
            if (folder / name).is_file()]


def _generation_config(config: dict, tokenizer_from: Path | None) -> dict:
    """The checkpoint's generation_config.json if it has one, else the config's special ids."""
    path = None if tokenizer_from is None else Path(tokenizer_from) / "generation_config.json"
    if path is not None and path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    return {key: config[key] for key in ("bos_token_id", "eos_token_id", "pad_token_id")
            if config.get(key) is not None}


def _land_folder(staging: Path, final: Path) -> None:
    """Moves a completed staging folder onto final, replacing what was there."""
    if final.exists():
        old = final.with_name(f".{final.name}.old-{os.getpid()}")
        if old.exists():
            shutil.rmtree(old)
        final.rename(old)
        staging.rename(final)
        shutil.rmtree(old)
    else:
        staging.rename(final)


def export_onnx(config: dict, tensors: dict[str, np.ndarray], out_dir: Path,
                precisions=("fp32",), tokenizer_from: Path | None = None,
                write_safetensors: bool = True, source: dict | None = None) -> dict:
    """Writes HF-named tensors as model folders out_dir/<precision> (see the module docstring).

    config: a HF config.json as a dict (llama, qwen2, mistral); tensors: HF names -> arrays
    ([out, in] as in the checkpoint; any float dtype, converted to fp32); tokenizer_from: a
    folder with tokenizer.json and tokenizer_config.json (None: keep those of the folder being
    replaced); source: extra keys for config.json's "frognano" block. Each folder is built beside
    its target and renamed into place. Returns a summary (folders, files, seconds).

    Speed: fp32 weights are streamed straight into model.onnx.data (GraphBuilder with a data
    file), so the fp32 folder costs about one write of the weights plus one for
    model.safetensors. SmolLM2-135M-Instruct, fp32 with model.safetensors, measured on 2 shared
    CPU cores: 1.9-2.8 s (about 1.5 s writing 1.2 GB, 0.7 s transposing the weights, 0.4 s
    deleting the replaced folder); 1.35 s without model.safetensors. int4 adds about 10 s
    (MatMulNBitsQuantizer).
    """
    from onnx import save_model  # noqa: PLC0415

    started = time.perf_counter()
    out_dir = Path(out_dir)
    precisions = list(precisions)
    if not precisions or set(precisions) - {"fp32", "int4"}:
        raise ValueError(f"precisions must be a non-empty subset of fp32,int4 (got {precisions})")
    hp = hparams_from_hf_config(config)
    hf = checked_hf_tensors(hp, tensors)
    tokenizer_files = _tokenizer_sources(tokenizer_from, [out_dir / p for p in ("fp32", "int4")])
    generation = _generation_config(config, tokenizer_from)
    source = dict(source or {"source": "export_onnx"})
    out_dir.mkdir(parents=True, exist_ok=True)
    files: dict[str, int] = {}
    folders: dict[str, str] = {}
    for precision in ("fp32", "int4"):
        if precision not in precisions:
            continue
        final = out_dir / precision
        staging = out_dir / f".{precision}.partial-{os.getpid()}"
        if staging.exists():
            shutil.rmtree(staging)
        staging.mkdir()
        metadata = {"frognano.source": str(source.get("source", "")), "frognano.precision": precision}
        written = [staging / "model.onnx", staging / "model.onnx.data"]
        if precision == "fp32":
            with open(staging / "model.onnx.data", "wb") as data_file:
                model, _ = build_decoder_model(hp, hf, metadata, data_file=data_file)
            save_model(model, staging / "model.onnx")
            if write_safetensors:
                written.append(write_hf_safetensors(staging / HF_WEIGHT_FILE, hp, hf))
        else:
            model, _ = build_decoder_model(hp, hf, metadata)
            model = quantize_int4_rtn(model)
            _set_model_prop(model, "frognano.int4_method", "rtn")
            save_onnx(model, staging / "model.onnx")
        del model
        folder_source = dict(source, int4_method="rtn") if precision == "int4" else source
        for name, content in _hf_folder_configs(config, hp, precision, generation, folder_source).items():
            written.append(_write_json(staging / name, content))
        for path in tokenizer_files:
            shutil.copyfile(path, staging / path.name)
            written.append(staging / path.name)
        sizes = {path.name: path.stat().st_size for path in written}
        _land_folder(staging, final)
        files.update({str(final / name): size for name, size in sizes.items()})
        folders[precision] = str(final)
        log(f"wrote {final} (model.onnx {(sizes['model.onnx'] + sizes['model.onnx.data']) / 1e6:.1f} MB)")
    return {"out": str(out_dir), "folders": folders, "precisions": list(folders),
            "model_type": hp.model_type, "files": files,
            "seconds": round(time.perf_counter() - started, 2)}


def from_hf(checkpoint: Path, out_dir: Path, precisions: list[str]) -> dict:
    """Converts a HF checkpoint folder (config.json, safetensors weights, tokenizer files) into
    model folders out_dir/fp32 and/or out_dir/int4 (int4: MatMulNBitsQuantizer, method rtn)."""
    started = time.perf_counter()
    checkpoint = Path(checkpoint)
    if not checkpoint.is_dir():
        raise ConversionError(f"{checkpoint} is not a folder")
    config_path = checkpoint / "config.json"
    if not config_path.is_file():
        raise ConversionError(f"{checkpoint} has no config.json (not a Hugging Face checkpoint)")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConversionError(f"{config_path} is not valid JSON: {error}") from None
    hp = hparams_from_hf_config(config)  # fail on the config before reading any weights
    _tokenizer_sources(checkpoint, [])
    log(f"reading {checkpoint} ({hp.model_type}: {hp.num_hidden_layers} layers, hidden "
        f"{hp.hidden_size}, heads {hp.num_attention_heads}/{hp.num_key_value_heads}, vocab {hp.vocab_size})")
    tensors = read_checkpoint_tensors(checkpoint)
    if (checkpoint / HF_WEIGHT_FILE).is_file():
        weight_files = [checkpoint / HF_WEIGHT_FILE]
    else:
        index = json.loads((checkpoint / HF_INDEX_FILE).read_text(encoding="utf-8"))
        weight_files = sorted({checkpoint / name for name in index["weight_map"].values()})
    digests = [sha256_of_file(path) for path in weight_files]
    source_sha256 = digests[0] if len(digests) == 1 else hashlib.sha256("".join(digests).encode()).hexdigest()
    source = {"source": checkpoint.name, "source_format": "huggingface", "source_sha256": source_sha256}
    summary = export_onnx(config, tensors, out_dir, precisions, tokenizer_from=checkpoint, source=source)
    summary.update({"command": "from-hf", "checkpoint": str(checkpoint),
                    "seconds": round(time.perf_counter() - started, 2)})
    return summary



def _set_model_prop(model, key: str, value: str) -> None:
    for prop in model.metadata_props:
        if prop.key == key:
            prop.value = value
            return
    entry = model.metadata_props.add()
    entry.key, entry.value = key, value


# ----------------------------------------------------------------------------------------------
# Independent numpy reference (llama.cpp semantics)
# ----------------------------------------------------------------------------------------------


class ReferenceLlama:
    """Float64 forward pass over the dequantized GGUF weights, written from llama.cpp's semantics.

    Deliberately shares no weight handling with the converter: Q/K rows stay in the GGUF order
    and rotary rotates adjacent pairs (x[2i], x[2i+1]) by pos * base^(-2i/d) (llama.cpp's
    LLAMA_ROPE_TYPE_NORM); query head h reads KV head h // (heads / kv_heads).
    """

    def __init__(self, gguf_path: Path):
        gguf = _gguf()
        reader = gguf.GGUFReader(str(gguf_path))

        def meta(key, default=None):
            field = reader.fields.get(key)
            return default if field is None else field.contents()

        self.layers = int(meta("llama.block_count"))
        self.heads = int(meta("llama.attention.head_count"))
        self.kv_heads = int(meta("llama.attention.head_count_kv", self.heads))
        self.head_dim = int(meta("llama.embedding_length")) // self.heads
        self.base = float(meta("llama.rope.freq_base", 10000.0))
        self.eps = float(meta("llama.attention.layer_norm_rms_epsilon"))
        self.weights = {t.name: gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
                        for t in reader.tensors}

    def _weight(self, name: str) -> np.ndarray:
        return self.weights[name].astype(np.float64)

    def _rms_norm(self, x: np.ndarray, weight_name: str) -> np.ndarray:
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * self._weight(weight_name)

    def _rope_adjacent_pairs(self, x: np.ndarray) -> np.ndarray:
        """x: [rows, seq, heads, head_dim]; positions 0..seq-1."""
        seq = x.shape[1]
        pair = np.arange(self.head_dim // 2, dtype=np.float64)
        theta = np.arange(seq, dtype=np.float64)[:, None] * self.base ** (-2.0 * pair / self.head_dim)
        cos, sin = np.cos(theta)[None, :, None, :], np.sin(theta)[None, :, None, :]
        even, odd = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = even * cos - odd * sin
        out[..., 1::2] = even * sin + odd * cos
        return out

    def logits(self, rows: list[list[int]]) -> np.ndarray:
        """Logits [rows, seq, vocab] (float32); all rows must have the same length, no padding."""
        if len({len(r) for r in rows}) != 1:
            raise ValueError("reference rows must all have the same length")
        ids = np.asarray(rows, dtype=np.int64)
        count, seq = ids.shape
        x = self.weights["token_embd.weight"][ids].astype(np.float64)
        group = self.heads // self.kv_heads
        future = np.triu(np.ones((seq, seq), dtype=bool), k=1)
        for layer in range(self.layers):
            p = f"blk.{layer}."
            h = self._rms_norm(x, p + "attn_norm.weight")
            q = (h @ self._weight(p + "attn_q.weight").T).reshape(count, seq, self.heads, self.head_dim)
            k = (h @ self._weight(p + "attn_k.weight").T).reshape(count, seq, self.kv_heads, self.head_dim)
            v = (h @ self._weight(p + "attn_v.weight").T).reshape(count, seq, self.kv_heads, self.head_dim)
            q, k = self._rope_adjacent_pairs(q), self._rope_adjacent_pairs(k)
            attended = np.empty_like(q)
            for head in range(self.heads):
                kv = head // group
                scores = np.einsum("rsd,rtd->rst", q[:, :, head], k[:, :, kv]) / math.sqrt(self.head_dim)
                scores[:, future] = -np.inf
                scores -= scores.max(axis=-1, keepdims=True)
                probs = np.exp(scores)
                probs /= probs.sum(axis=-1, keepdims=True)
                attended[:, :, head] = np.einsum("rst,rtd->rsd", probs, v[:, :, kv])
            x = x + attended.reshape(count, seq, -1) @ self._weight(p + "attn_output.weight").T
            h = self._rms_norm(x, p + "ffn_norm.weight")
            gate = h @ self._weight(p + "ffn_gate.weight").T
            up = h @ self._weight(p + "ffn_up.weight").T
            x = x + (gate / (1.0 + np.exp(-gate)) * up) @ self._weight(p + "ffn_down.weight").T
        x = self._rms_norm(x, "output_norm.weight")
        head_name = "output.weight" if "output.weight" in self.weights else "token_embd.weight"
        return (x @ self._weight(head_name).T).astype(np.float32)


class ReferenceHF:
    """Float64 forward pass over a Hugging Face checkpoint (config.json + safetensors), written
    from transformers' modeling_llama / modeling_qwen2 semantics, sharing no graph or weight code
    with the converter: Q/K rows in HF order, rotate_half rotary (x[i] with x[i + d/2]) at
    inverse frequencies computed here one by one (incl. "linear" and "llama3" scaling), optional
    q/k/v/o biases, repeat_kv grouping, untied lm_head when the config says so.
    """

    def __init__(self, checkpoint: Path):
        config = json.loads((Path(checkpoint) / "config.json").read_text(encoding="utf-8"))
        self.layers = int(config["num_hidden_layers"])
        self.heads = int(config["num_attention_heads"])
        self.kv_heads = int(config.get("num_key_value_heads") or self.heads)
        self.head_dim = int(config.get("head_dim") or int(config["hidden_size"]) // self.heads)
        self.eps = float(config.get("rms_norm_eps", 1e-6))
        self.tied = bool(config.get("tie_word_embeddings", False))
        theta, scaling = _rope_scaling_of(config)
        self.inverse_frequency = np.array([self._inverse_frequency(i, theta, scaling)
                                           for i in range(self.head_dim // 2)])
        self.weights = read_checkpoint_tensors(Path(checkpoint))

    def _inverse_frequency(self, index: int, theta: float, scaling: dict | None) -> float:
        frequency = 1.0 / theta ** (2.0 * index / self.head_dim)
        if scaling is None:
            return frequency
        if scaling["rope_type"] == "linear":
            return frequency / scaling["factor"]
        # llama3: keep short wavelengths, divide long ones by factor, interpolate in between.
        wavelength = 2.0 * math.pi / frequency
        old = scaling["original_max_position_embeddings"]
        low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
        if wavelength < old / high:
            return frequency
        if wavelength > old / low:
            return frequency / scaling["factor"]
        smooth = (old / wavelength - low) / (high - low)
        return (1.0 - smooth) * frequency / scaling["factor"] + smooth * frequency

    def _weight(self, name: str) -> np.ndarray:
        return np.asarray(self.weights[name], dtype=np.float64)

    def _linear(self, x: np.ndarray, module: str) -> np.ndarray:
        out = x @ self._weight(module + ".weight").T
        if module + ".bias" in self.weights:
            out = out + self._weight(module + ".bias")
        return out

    def _rms_norm(self, x: np.ndarray, weight_name: str) -> np.ndarray:
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * self._weight(weight_name)

    def _rotate_half_rope(self, x: np.ndarray) -> np.ndarray:
        """x: [rows, seq, heads, head_dim]; positions 0..seq-1."""
        angles = np.arange(x.shape[1], dtype=np.float64)[:, None] * self.inverse_frequency
        angles = np.concatenate([angles, angles], axis=-1)
        cos, sin = np.cos(angles)[None, :, None, :], np.sin(angles)[None, :, None, :]
        half = self.head_dim // 2
        rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        return x * cos + rotated * sin

    def logits(self, rows: list[list[int]]) -> np.ndarray:
        """Logits [rows, seq, vocab] (float32); all rows must have the same length, no padding."""
        if len({len(r) for r in rows}) != 1:
            raise ValueError("reference rows must all have the same length")
        ids = np.asarray(rows, dtype=np.int64)
        count, seq = ids.shape
        x = self._weight("model.embed_tokens.weight")[ids]
        group = self.heads // self.kv_heads
        future = np.triu(np.ones((seq, seq), dtype=bool), k=1)
        for layer in range(self.layers):
            p = f"model.layers.{layer}."
            h = self._rms_norm(x, p + "input_layernorm.weight")
            q = self._linear(h, p + "self_attn.q_proj").reshape(count, seq, self.heads, self.head_dim)
            k = self._linear(h, p + "self_attn.k_proj").reshape(count, seq, self.kv_heads, self.head_dim)
            v = self._linear(h, p + "self_attn.v_proj").reshape(count, seq, self.kv_heads, self.head_dim)
            q, k = self._rotate_half_rope(q), self._rotate_half_rope(k)
            attended = np.empty_like(q)
            for head in range(self.heads):
                kv = head // group
                scores = np.einsum("rsd,rtd->rst", q[:, :, head], k[:, :, kv]) / math.sqrt(self.head_dim)
                scores[:, future] = -np.inf
                scores -= scores.max(axis=-1, keepdims=True)
                probs = np.exp(scores)
                probs /= probs.sum(axis=-1, keepdims=True)
                attended[:, :, head] = np.einsum("rst,rtd->rsd", probs, v[:, :, kv])
            x = x + self._linear(attended.reshape(count, seq, -1), p + "self_attn.o_proj")
            h = self._rms_norm(x, p + "post_attention_layernorm.weight")
            gate = self._linear(h, p + "mlp.gate_proj")
            up = self._linear(h, p + "mlp.up_proj")
            x = x + self._linear(gate / (1.0 + np.exp(-gate)) * up, p + "mlp.down_proj")
        x = self._rms_norm(x, "model.norm.weight")
        head_name = "model.embed_tokens.weight" if self.tied else "lm_head.weight"
        return (x @ self._weight(head_name).T).astype(np.float32)


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


# ----------------------------------------------------------------------------------------------
# tiny: a small random llama GGUF for tests
# ----------------------------------------------------------------------------------------------

TINY_CORPUS = """\
The quick brown fox jumps over the lazy dog. A small model learns to write code, one token at a time.
def reverse_string(text):
    return text[::-1]

def add(a, b):
    return a + b

class Counter:
    def __init__(self):
        self.count = 0

    def increment(self):
        self.count += 1
        return self.count

for index in range(10):
    print(index, reverse_string("hello world"))

The agent reads the task, edits the file, runs the tests and reports the result.
If the tests fail, the agent reads the error message and tries again.
"""

TINY_HPARAMS = {"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "ffn": 128,
                "context": 4096, "rope_base": 10000.0, "eps": 1e-5, "merges": 300}
TINY_SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


def learn_bpe_merges(text: str, count: int) -> list[tuple[str, str]]:
    """Greedy byte-level BPE training on text (ties broken lexicographically, deterministic)."""
    byte_to_char = bytes_to_unicode()
    # A rough stdlib stand-in for the pre-tokenizer: merges only need to be plausible.
    words: dict[tuple[str, ...], int] = {}
    for piece in re.findall(r" ?[^\W\d_]+| ?\d| ?[^\s\w]+|\s+", text):
        symbols = tuple(byte_to_char[b] for b in piece.encode("utf-8"))
        words[symbols] = words.get(symbols, 0) + 1
    merges: list[tuple[str, str]] = []
    known = set(byte_to_char.values())
    while len(merges) < count:
        pairs: dict[tuple[str, str], int] = {}
        for word, frequency in words.items():
            for pair in zip(word, word[1:], strict=False):
                pairs[pair] = pairs.get(pair, 0) + frequency
        if not pairs:
            break
        best = min(pairs, key=lambda pair: (-pairs[pair], pair))
        merged_symbol = best[0] + best[1]
        new_words = {}
        for word, frequency in words.items():
            out, index = [], 0
            while index < len(word):
                if index + 1 < len(word) and (word[index], word[index + 1]) == best:
                    out.append(merged_symbol)
                    index += 2
                else:
                    out.append(word[index])
                    index += 1
            new_words[tuple(out)] = new_words.get(tuple(out), 0) + frequency
        words = new_words
        if merged_symbol not in known:  # a second route to an existing token adds nothing
            known.add(merged_symbol)
            merges.append(best)
    return merges


def write_tiny_gguf(path: Path, seed: int) -> None:
    """A 2-layer random llama GGUF with SmolLM2's metadata keys and tensor types."""
    gguf = _gguf()
    quant = gguf.GGMLQuantizationType
    hp = TINY_HPARAMS
    head_dim = hp["hidden"] // hp["heads"]
    byte_to_char = bytes_to_unicode()
    merges = learn_bpe_merges(TINY_CORPUS, hp["merges"])
    tokens = list(TINY_SPECIAL_TOKENS) + [byte_to_char[b] for b in range(256)]
    tokens += [first + second for first, second in merges]
    token_types = [TOKEN_TYPE_CONTROL] * len(TINY_SPECIAL_TOKENS)
    token_types += [TOKEN_TYPE_NORMAL] * (len(tokens) - len(TINY_SPECIAL_TOKENS))
    vocab_size = len(tokens)

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_type("model")
    writer.add_name("FrogNano tiny random llama")
    writer.add_block_count(hp["layers"])
    writer.add_context_length(hp["context"])
    writer.add_embedding_length(hp["hidden"])
    writer.add_feed_forward_length(hp["ffn"])
    writer.add_head_count(hp["heads"])
    writer.add_head_count_kv(hp["kv_heads"])
    writer.add_rope_freq_base(hp["rope_base"])
    writer.add_layer_norm_rms_eps(hp["eps"])
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_1)
    writer.add_vocab_size(vocab_size)
    writer.add_rope_dimension_count(head_dim)
    writer.add_add_space_prefix(False)
    writer.add_add_bos_token(False)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokens)
    writer.add_token_types(token_types)
    writer.add_token_merges([f"{first} {second}" for first, second in merges])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_pad_token_id(2)
    writer.add_chat_template(CHATML_TEMPLATE)
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)

    rng = np.random.default_rng(seed)

    def normal(shape, std):
        return rng.normal(0.0, std, size=shape).astype(np.float32)

    def add_quantized(name, values, qtype):
        writer.add_tensor(name, gguf.quants.quantize(values, qtype), raw_dtype=qtype)

    hidden, ffn, heads, kv_heads = hp["hidden"], hp["ffn"], hp["heads"], hp["kv_heads"]
    # Embedding std 0.4 gives (tied) logits with std ~ 0.4 * sqrt(hidden) ~ 3: clear argmaxes.
    add_quantized("token_embd.weight", normal((vocab_size, hidden), 0.4), quant.Q8_0)
    for layer in range(hp["layers"]):
        p = f"blk.{layer}."
        writer.add_tensor(p + "attn_norm.weight", 1.0 + normal((hidden,), 0.1))
        # Q/K std 0.2: attention scores of order 1-3, so the attention pattern (and thus rotary)
        # really shapes the output. Rows are random, so they are "already" in GGUF order.
        add_quantized(p + "attn_q.weight", normal((heads * head_dim, hidden), 0.2), quant.Q4_1)
        add_quantized(p + "attn_k.weight", normal((kv_heads * head_dim, hidden), 0.2), quant.Q4_1)
        add_quantized(p + "attn_v.weight", normal((kv_heads * head_dim, hidden), hidden ** -0.5), quant.Q4_1)
        add_quantized(p + "attn_output.weight", normal((hidden, heads * head_dim), hidden ** -0.5),
                      quant.Q4_1)
        writer.add_tensor(p + "ffn_norm.weight", 1.0 + normal((hidden,), 0.1))
        add_quantized(p + "ffn_gate.weight", normal((ffn, hidden), hidden ** -0.5), quant.Q4_1)
        add_quantized(p + "ffn_up.weight", normal((ffn, hidden), hidden ** -0.5), quant.Q4_1)
        add_quantized(p + "ffn_down.weight", normal((hidden, ffn), ffn ** -0.5), quant.Q4_1)
    writer.add_tensor("output_norm.weight", 1.0 + normal((hidden,), 0.1))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def make_tiny(out_dir: Path, seed: int, int4_method: str = "gguf",
              layouts: list[str] | tuple[str, ...] = LAYOUTS) -> dict:
    started = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    gguf_path = out_dir / "tiny.gguf"
    log(f"writing {gguf_path}")
    write_tiny_gguf(gguf_path, seed)
    summary = convert(gguf_path, out_dir, ["fp32", "int4"], int4_method, layouts)
    summary.update({"command": "tiny", "gguf": str(gguf_path),
                    "seconds": round(time.perf_counter() - started, 2)})
    return summary


# ----------------------------------------------------------------------------------------------
# CLI
# ----------------------------------------------------------------------------------------------


def parse_rows(text: str) -> list[list[int]]:
    """'1,2,3;4,5,6' -> [[1, 2, 3], [4, 5, 6]]."""
    return [[int(token) for token in row.split(",") if token.strip()]
            for row in text.split(";") if row.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    convert_cmd = commands.add_parser("convert", help="GGUF -> ONNX model folders")
    convert_cmd.add_argument("--gguf", type=Path, required=True)
    convert_cmd.add_argument("--out", type=Path, required=True)
    convert_cmd.add_argument("--precision", default="fp32,int4", help="comma list of fp32,int4")
    convert_cmd.add_argument("--int4-method", choices=INT4_METHODS, default="gguf",
                             help="gguf: reuse the GGUF's blocks exactly; rtn: MatMulNBitsQuantizer")
    convert_cmd.add_argument("--layout", default="optimum",
                             help="optimum (OUT/fp32, OUT/int4), genai (onnxruntime-genai builder "
                                  "layout: OUT/genai-fp32, OUT/genai-int4) or all")

    tiny_cmd = commands.add_parser("tiny", help="write and convert a tiny random llama GGUF")
    tiny_cmd.add_argument("--out", type=Path, required=True)
    tiny_cmd.add_argument("--seed", type=int, default=0)
    tiny_cmd.add_argument("--int4-method", choices=INT4_METHODS, default="gguf")
    tiny_cmd.add_argument("--layout", default="all",
                          help="optimum, genai or all (default: all four folders)")

    from_hf_cmd = commands.add_parser("from-hf", help="Hugging Face checkpoint -> ONNX model folders")
    from_hf_cmd.add_argument("--checkpoint", type=Path, required=True,
                             help="folder with config.json, model.safetensors (or a sharded "
                                  "model.safetensors.index.json), tokenizer.json, tokenizer_config.json")
    from_hf_cmd.add_argument("--out", type=Path, required=True)
    from_hf_cmd.add_argument("--precisions", "--precision", default="fp32,int4",
                             help="comma list of fp32,int4 (int4: MatMulNBitsQuantizer, rtn)")

    reference_cmd = commands.add_parser("reference", help="numpy reference logits")
    reference_source = reference_cmd.add_mutually_exclusive_group(required=True)
    reference_source.add_argument("--gguf", type=Path)
    reference_source.add_argument("--checkpoint", type=Path, help="a Hugging Face checkpoint folder")
    reference_cmd.add_argument("--ids", required=True, help="rows of equal length: 1,2,3;4,5,6")
    reference_cmd.add_argument("--out", type=Path, help="save logits [rows, seq, vocab] as .npy")

    check_cmd = commands.add_parser("check", help="compare an ONNX folder with the reference")
    check_source = check_cmd.add_mutually_exclusive_group(required=True)
    check_source.add_argument("--gguf", type=Path, help="reference over this GGUF's weights")
    check_source.add_argument("--checkpoint", type=Path,
                              help="reference over this Hugging Face checkpoint's weights (a "
                                   "from-hf source, or a fp32 folder with model.safetensors)")
    check_cmd.add_argument("--model-dir", type=Path, required=True)
    check_cmd.add_argument("--ids", help="rows (any lengths): 1,2,3;4,5; default: built-in prompts")
    check_cmd.add_argument("--decode-steps", type=int, default=4)

    generate_cmd = commands.add_parser("generate", help="greedy chat generation (sanity tool)")
    generate_cmd.add_argument("--model-dir", type=Path, required=True)
    generate_cmd.add_argument("--prompt", required=True)
    generate_cmd.add_argument("--system", help="system message (default: the chat template's own, if any)")
    generate_cmd.add_argument("--raw", action="store_true", help="no ChatML, continue the text")
    generate_cmd.add_argument("--max-new", type=int, default=40)

    args = parser.parse_args(argv)
    try:
        summary, exit_code = _run_command(args)
    except (ValueError, OSError) as error:
        # One line, no traceback: bad checkpoints and arguments are the caller's to fix.
        message = str(error).replace("\n", " ")
        print(f"[frognano_models] error: {message}", file=sys.stderr, flush=True)
        return 2
    print(json.dumps(summary))
    return exit_code


def _split_precisions(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def _run_command(args) -> tuple[dict, int]:
    exit_code = 0
    if args.command == "from-hf":
        summary = from_hf(args.checkpoint, args.out, _split_precisions(args.precisions))
    elif args.command == "convert":
        summary = convert(args.gguf, args.out, [p.strip() for p in args.precision.split(",") if p.strip()],
                          args.int4_method, parse_layouts(args.layout))
    elif args.command == "tiny":
        summary = make_tiny(args.out, args.seed, args.int4_method, parse_layouts(args.layout))
    elif args.command == "reference":
        started = time.perf_counter()
        reference = ReferenceHF(args.checkpoint) if args.checkpoint else ReferenceLlama(args.gguf)
        logits = reference.logits(parse_rows(args.ids))
        if args.out:
            np.save(args.out, logits)
        summary = {"command": "reference", "shape": list(logits.shape),
                   "last_argmax": np.argmax(logits[:, -1], axis=-1).tolist(),
                   "out": str(args.out) if args.out else None,
                   "seconds": round(time.perf_counter() - started, 2)}
    elif args.command == "check":
        summary = run_check(args.gguf, args.model_dir, parse_rows(args.ids) if args.ids else None,
                            args.decode_steps, checkpoint=args.checkpoint)
        exit_code = 0 if summary["ok"] else 1
    else:
        started = time.perf_counter()
        tokenizer = ByteLevelBpeTokenizer.from_file(args.model_dir / "tokenizer.json")
        decoder = OnnxDecoder(args.model_dir)
        if args.raw:
            text = args.prompt
        else:
            tokenizer_config = json.loads(
                (args.model_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
            system = args.system or default_system_prompt(tokenizer_config.get("chat_template"))
            messages = [{"role": "system", "content": system}] if system else []
            text = render_chatml(messages + [{"role": "user", "content": args.prompt}])
        prompt_ids = tokenizer.encode(text)
        eos = decoder.config.get("eos_token_id")
        stop_ids = set(eos if isinstance(eos, list) else [eos])
        generated = greedy_generate(decoder, prompt_ids, args.max_new, stop_ids)
        summary = {"command": "generate", "prompt_tokens": len(prompt_ids), "ids": generated,
                   "text": tokenizer.decode(generated), "seconds": round(time.perf_counter() - started, 2)}
    return summary, exit_code


if __name__ == "__main__":
    sys.exit(main())
