"""int4 weights: MatMul -> MatMulNBits, either re-rounded by onnxruntime's quantizer ("rtn") or
carrying the GGUF's own Q4_0 / Q4_1 / Q8_0 blocks over exactly ("gguf"; part of the converter,
frognano_models.py)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from frognano_models_common import LinearSource, _gguf
from frognano_models_gguf import gguf_rows_to_rotate_half_rows


INT4_BLOCK_SIZE = 32  # also the block size of ggml's Q4_0, Q4_1 and Q8_0
INT4_IS_SYMMETRIC = False
INT4_ACCURACY_LEVEL = 4  # MatMulNBits computes with int8-quantized activations
# "gguf": carry the GGUF's own 4/8-bit blocks over (exact weights, see quantize_int4_from_gguf);
# "rtn": onnxruntime's MatMulNBitsQuantizer re-rounds the dequantized fp32 weights to 4 bits.
INT4_METHODS = ("gguf", "rtn")


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
