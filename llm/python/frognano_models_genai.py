"""The onnxruntime-genai builder layout (see frognano_models.py's docstring): its decoder graph,
and genai_config.json for either layout (part of the converter)."""

from __future__ import annotations

import numpy as np

from frognano_models_common import ConversionError, LinearSource, LlamaHParams
from frognano_models_graph import lm_head_weight, rotary_tables
from frognano_models_tokenizer import GgufVocabulary


# The genai layout uses what onnxruntime-genai's builder (0.18.0) declares.
GENAI_ONNX_OPSET = 22
GENAI_ONNX_IR_VERSION = 10


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
