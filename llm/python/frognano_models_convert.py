"""Model folders: a llama GGUF (convert) or Hugging Face tensors (export_onnx, from_hf) written as
ONNX model folders with their config, generation, tokenizer and genai files (part of the
converter, frognano_models.py)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from frognano_models_common import (LAYOUTS, ConversionError, LlamaHParams, _first_id, _gguf,
                                    _set_model_prop, _write_json, log, sha256_of_file)
from frognano_models_genai import _genai_config, _genai_layout_genai_config, build_genai_decoder_model
from frognano_models_gguf import dequantized_tensors, gguf_to_hf_tensors, read_hparams
from frognano_models_graph import build_decoder_model, save_onnx, save_onnx_with_external_data
from frognano_models_hf import (HF_ARCHITECTURES, HF_INDEX_FILE, HF_WEIGHT_FILE,
                                OPTIONAL_TOKENIZER_FILES, TOKENIZER_FILES, checked_hf_tensors,
                                hparams_from_hf_config, read_checkpoint_tensors, write_hf_safetensors)
from frognano_models_int4 import INT4_METHODS, quantize_int4_from_gguf, quantize_int4_rtn
from frognano_models_tokenizer import TOKEN_TYPE_CONTROL, GgufVocabulary, tokenizer_json


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


@dataclass(frozen=True)
class SpecialIds:
    """The special token ids _genai_config reads (duck-typing GgufVocabulary's)."""

    bos_id: int | None
    eos_id: int | None
    pad_id: int | None


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
