"""Hugging Face checkpoints: tensor names and shapes, safetensors files (read and written here
directly), sharded checkpoints and config.json (part of the converter, frognano_models.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from frognano_models_common import ConversionError, LlamaHParams


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


def write_hf_safetensors(path: Path, hp: LlamaHParams, tensors: dict[str, np.ndarray]) -> Path:
    """model.safetensors of a fp32 folder: the HF-named, HF-order fp32 tensors the graph was built
    from (lm_head.weight only when the embeddings are untied), loadable by transformers."""
    return write_safetensors(path, {name: tensors[name] for name in hf_tensor_shapes(hp)})
