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

This file is the converter's entry point: the CLI below and, re-exported, every public name of
its parts, the frognano_models_*.py modules beside it (imported as top-level modules from this
file's folder, which the Rust side writes into the cache as one folder, llm/src/assets.rs):
_common (shared helpers, hyper-parameters), _gguf (reading a GGUF), _hf (Hugging Face
checkpoints, safetensors), _graph (the optimum layout's graph, saving), _genai (the genai
layout's graph and genai_config.json), _int4 (MatMulNBits weights), _tokenizer, _convert (model
folders: convert, export_onnx, from_hf), _reference (the numpy references), _check (check,
generate) and _tiny.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

# The parts (frognano_models_*.py) are top-level modules of this file's folder: run as a script,
# the folder is sys.path[0] already; loaded by file path (importlib) it may not be on sys.path.
_FOLDER = os.path.dirname(os.path.abspath(__file__))
if _FOLDER not in sys.path:
    sys.path.insert(0, _FOLDER)

# Every public name of the parts, importable from frognano_models as when it was one file.
from frognano_models_check import (  # noqa: E402, F401
    CONSISTENCY_REL_TOL, DEFAULT_CHECK_PROMPTS, DEFAULT_CHECK_SYSTEM, FP32_REL_TOL,
    INT4_CONSISTENCY_REL_TOL, INT4_MIN_CONSISTENCY_ARGMAX, INT4_TOLERANCES, Comparison,
    OnnxDecoder, default_check_rows, greedy_generate, left_pad, run_check,
)
from frognano_models_common import (  # noqa: E402, F401
    LAYOUTS, ConversionError, LinearSource, LlamaHParams, log, sha256_of_file,
)
from frognano_models_convert import (  # noqa: E402, F401
    SpecialIds, convert, export_onnx, from_hf, layout_folder, parse_layouts,
)
from frognano_models_genai import (  # noqa: E402, F401
    GENAI_ONNX_IR_VERSION, GENAI_ONNX_OPSET, build_genai_decoder_model, genai_cache_names,
)
from frognano_models_gguf import (  # noqa: E402, F401
    dequantized_tensors, gguf_field, gguf_rows_to_rotate_half_rows, gguf_to_hf_tensors,
    read_hparams,
)
from frognano_models_graph import (  # noqa: E402, F401
    EXTERNAL_DATA_ALIGNMENT, EXTERNAL_DATA_THRESHOLD, MASK_VALUE, ONNX_IR_VERSION, ONNX_OPSET,
    GraphBuilder, build_decoder_model, lm_head_weight, rope_inverse_frequency, rotary_tables,
    save_onnx, save_onnx_with_external_data,
)
from frognano_models_hf import (  # noqa: E402, F401
    HF_ARCHITECTURES, HF_INDEX_FILE, HF_WEIGHT_FILE, OPTIONAL_TOKENIZER_FILES,
    SAFETENSORS_DTYPES, TOKENIZER_FILES, checked_hf_tensors, hf_layer_linear_names,
    hf_tensor_shapes, hparams_from_hf_config, read_checkpoint_tensors, read_safetensors,
    write_hf_safetensors, write_safetensors,
)
from frognano_models_int4 import (  # noqa: E402, F401
    INT4_ACCURACY_LEVEL, INT4_BLOCK_SIZE, INT4_IS_SYMMETRIC, INT4_METHODS, NBitsWeight,
    gguf_tensor_to_nbits, packed_nbits, quantize_int4_from_gguf, quantize_int4_rtn,
)
from frognano_models_reference import (  # noqa: E402, F401
    ReferenceHF, ReferenceLlama,
)
from frognano_models_tiny import (  # noqa: E402, F401
    TINY_CORPUS, TINY_HPARAMS, TINY_SPECIAL_TOKENS, learn_bpe_merges, make_tiny, write_tiny_gguf,
)
from frognano_models_tokenizer import (  # noqa: E402, F401
    CHATML_TEMPLATE, DIGIT_SPLIT_REGEX, GPT2_SPLIT_REGEX, TOKEN_TYPE_CONTROL, TOKEN_TYPE_NORMAL,
    TOKEN_TYPE_USER_DEFINED, ByteLevelBpeTokenizer, GgufVocabulary, bytes_to_unicode,
    default_system_prompt, gpt2_split, pretokenize, render_chatml, tokenizer_json,
)


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
