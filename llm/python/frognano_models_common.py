"""Shared by every part of the converter (frognano_models.py): the layouts, progress lines, file
digests, the lazy gguf import, the hyper-parameters, the conversion error, where a projection
weight came from in a GGUF, and small file and model helpers."""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path

LAYOUTS = ("optimum", "genai")


# gguf, onnx and onnxruntime are imported lazily (see the helpers below) so that `--help` and the
# pure-Python parts start fast.


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


class ConversionError(ValueError):
    """A checkpoint that cannot be converted (reported as one line, exit status 2)."""


@dataclass(frozen=True)
class LinearSource:
    """How a MatMul weight initializer (W^T) was derived from a GGUF tensor W [out, in]."""

    gguf_name: str
    rotary_heads: int = 0  # > 0: rows un-permuted with gguf_rows_to_rotate_half_rows
    scale: float = 1.0


def _write_json(path: Path, content) -> Path:
    path.write_text(json.dumps(content, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def _first_id(value) -> int | None:
    if isinstance(value, list):
        return int(value[0]) if value else None
    return None if value is None else int(value)


def _set_model_prop(model, key: str, value: str) -> None:
    for prop in model.metadata_props:
        if prop.key == key:
            prop.value = value
            return
    entry = model.metadata_props.add()
    entry.key, entry.value = key, value
