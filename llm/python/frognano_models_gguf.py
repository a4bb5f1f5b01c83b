"""Reading a llama GGUF: metadata, hyper-parameters, dequantized tensors, and their renaming to
Hugging Face names in HF row order (part of the converter, frognano_models.py)."""

from __future__ import annotations

import numpy as np

from frognano_models_common import LinearSource, LlamaHParams, _gguf


def gguf_field(reader, key: str, default=None):
    """Returns the decoded value of a GGUF metadata key (scalars, strings and arrays)."""
    field = reader.fields.get(key)
    if field is None:
        return default
    return field.contents()


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
