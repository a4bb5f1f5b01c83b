"""The ONNX decoder graph of the "optimum" layout (see frognano_models.py's docstring): rotary
tables, the graph builder with streamed external data, the decoder itself, and saving models
with external weights (part of the converter)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from frognano_models_common import LinearSource, LlamaHParams


ONNX_OPSET = 17
ONNX_IR_VERSION = 8  # the IR version that goes with opset 17; keeps older onnxruntime builds happy

# Added to the attention scores of masked keys. Large enough that exp() underflows to exactly 0,
# small enough that adding it twice can never overflow to -inf (which would turn into NaN).
MASK_VALUE = -1.0e9


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
