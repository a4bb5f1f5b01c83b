"""Independent numpy references: float64 forward passes over a GGUF's dequantized weights
(llama.cpp semantics) or a Hugging Face checkpoint's (transformers' semantics), which `check`
compares the ONNX models against (part of the converter, frognano_models.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from frognano_models_common import _gguf
from frognano_models_hf import _rope_scaling_of, read_checkpoint_tensors


class _NumpyReference:
    """What both references compute alike, in float64: RMSNorm, and causal softmax attention in
    which query head h reads KV head h // (heads / kv_heads) (HF's repeat_kv, llama.cpp's GQA).
    A subclass sets heads, kv_heads, head_dim and eps, and reads its weights with _weight."""

    def _rms_norm(self, x: np.ndarray, weight_name: str) -> np.ndarray:
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * self._weight(weight_name)

    def _attention(self, q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
        """q [rows, seq, heads, head_dim], k and v [rows, seq, kv_heads, head_dim], rotary
        applied; every query head's attention output, [rows, seq, heads, head_dim]."""
        seq = q.shape[1]
        group = self.heads // self.kv_heads
        future = np.triu(np.ones((seq, seq), dtype=bool), k=1)
        attended = np.empty_like(q)
        for head in range(self.heads):
            kv = head // group
            scores = np.einsum("rsd,rtd->rst", q[:, :, head], k[:, :, kv]) / math.sqrt(self.head_dim)
            scores[:, future] = -np.inf
            scores -= scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            attended[:, :, head] = np.einsum("rst,rtd->rsd", probs, v[:, :, kv])
        return attended


class ReferenceLlama(_NumpyReference):
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
        for layer in range(self.layers):
            p = f"blk.{layer}."
            h = self._rms_norm(x, p + "attn_norm.weight")
            q = (h @ self._weight(p + "attn_q.weight").T).reshape(count, seq, self.heads, self.head_dim)
            k = (h @ self._weight(p + "attn_k.weight").T).reshape(count, seq, self.kv_heads, self.head_dim)
            v = (h @ self._weight(p + "attn_v.weight").T).reshape(count, seq, self.kv_heads, self.head_dim)
            q, k = self._rope_adjacent_pairs(q), self._rope_adjacent_pairs(k)
            attended = self._attention(q, k, v)
            x = x + attended.reshape(count, seq, -1) @ self._weight(p + "attn_output.weight").T
            h = self._rms_norm(x, p + "ffn_norm.weight")
            gate = h @ self._weight(p + "ffn_gate.weight").T
            up = h @ self._weight(p + "ffn_up.weight").T
            x = x + (gate / (1.0 + np.exp(-gate)) * up) @ self._weight(p + "ffn_down.weight").T
        x = self._rms_norm(x, "output_norm.weight")
        head_name = "output.weight" if "output.weight" in self.weights else "token_embd.weight"
        return (x @ self._weight(head_name).T).astype(np.float32)


class ReferenceHF(_NumpyReference):
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
        for layer in range(self.layers):
            p = f"model.layers.{layer}."
            h = self._rms_norm(x, p + "input_layernorm.weight")
            q = self._linear(h, p + "self_attn.q_proj").reshape(count, seq, self.heads, self.head_dim)
            k = self._linear(h, p + "self_attn.k_proj").reshape(count, seq, self.kv_heads, self.head_dim)
            v = self._linear(h, p + "self_attn.v_proj").reshape(count, seq, self.kv_heads, self.head_dim)
            q, k = self._rotate_half_rope(q), self._rotate_half_rope(k)
            attended = self._attention(q, k, v)
            x = x + self._linear(attended.reshape(count, seq, -1), p + "self_attn.o_proj")
            h = self._rms_norm(x, p + "post_attention_layernorm.weight")
            gate = self._linear(h, p + "mlp.gate_proj")
            up = self._linear(h, p + "mlp.up_proj")
            x = x + self._linear(gate / (1.0 + np.exp(-gate)) * up, p + "mlp.down_proj")
        x = self._rms_norm(x, "model.norm.weight")
        head_name = "model.embed_tokens.weight" if self.tied else "lm_head.weight"
        return (x @ self._weight(head_name).T).astype(np.float32)
