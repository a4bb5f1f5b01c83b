"""The learner's weights: under Hugging Face names (LoRA merged), as a checkpoint folder, handed
to the converter's export_onnx (found by _load_converter), and learner checkpoints; part of
TorchLearner."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import os
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

if __package__:  # frognano._learner_weights, inside the package
    from ._learner_common import (
        ConfigError, LearnerError, ModelError, _atomic_write_text, _one_line, _torch,
    )
else:  # a top-level module beside torch_learner.py (see its imports)
    from _learner_common import (
        ConfigError, LearnerError, ModelError, _atomic_write_text, _one_line, _torch,
    )


CHECKPOINT_FORMAT = "frognano-learner-checkpoint"
CHECKPOINT_VERSION = 1
TOKENIZER_FILES = (
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
    "merges.txt", "tokenizer.model", "added_tokens.json", "chat_template.jinja",
    "chat_template.json", "generation_config.json",
)
CONVERTER_ENV = "FROGNANO_CONVERTER"


class _WeightsMixin:
    """TorchLearner's weights: handing them out (state_tensors, save_hf, export_onnx) and learner
    checkpoints (save_checkpoint, load_checkpoint)."""

    # -- weights and export ------------------------------------------------------------------------

    def state_tensors(self) -> dict[str, np.ndarray]:
        """Current weights under Hugging Face names, float32, LoRA merged (the model is unchanged).

        With tied word embeddings ``lm_head.weight`` is left out, as in HF checkpoint files."""
        torch = _torch()
        base = self._base_model()
        with torch.no_grad():
            state = base.state_dict()
            out: dict[str, np.ndarray] = {}
            deltas: dict[str, Any] = {}
            if self.is_lora:
                from peft.tuners.lora import LoraLayer

                for name, module in base.named_modules():
                    if isinstance(module, LoraLayer) and hasattr(module, "get_delta_weight"):
                        for adapter in module.active_adapters:
                            if adapter in module.lora_A:
                                delta = module.get_delta_weight(adapter)
                                key = f"{name}.weight"
                                deltas[key] = deltas[key] + delta if key in deltas else delta
            for key, tensor in state.items():
                if "lora_" in key:
                    continue
                key = key.replace(".base_layer.", ".")
                value = tensor.detach().float()
                if key in deltas:
                    value = value + deltas[key].float()
                out[key] = value.cpu().numpy().copy()
            if getattr(base.config, "tie_word_embeddings", False):
                out.pop("lm_head.weight", None)
        return out

    def hf_config(self) -> dict:
        config = json.loads(self._base_model().config.to_json_string(use_diff=False))
        config["dtype"] = "float32"
        config.pop("torch_dtype", None)
        config["use_cache"] = True
        return config

    def save_hf(self, out_dir) -> Path:
        """Writes config.json, model.safetensors and the source folder's tokenizer files."""
        from safetensors.numpy import save_file

        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        config = json.dumps(self.hf_config(), indent=2, sort_keys=True) + "\n"
        _atomic_write_text(out_dir / "config.json", config)
        tmp = out_dir / f".model.safetensors.tmp{os.getpid()}"
        save_file(self.state_tensors(), str(tmp), metadata={"format": "pt"})
        os.replace(tmp, out_dir / "model.safetensors")
        for name in TOKENIZER_FILES:
            source = self.model_dir / name
            if source.is_file() and source.resolve() != (out_dir / name).resolve():
                shutil.copy2(source, out_dir / name)
        return out_dir

    def export_onnx(self, out_dir, precisions=("fp32",), write_safetensors: bool = True) -> float:
        """Hands the current weights (``state_tensors``) to ``frognano_models.export_onnx``, in
        process, which writes ``out_dir/<precision>`` model folders; returns the seconds taken.
        The converter's summary is kept in ``last_export``."""
        started = time.perf_counter()
        module = _load_converter(self.config.converter)
        export = getattr(module, "export_onnx", None)
        if export is None:
            raise ModelError(f"the converter {getattr(module, '__file__', module)} has no export_onnx")
        has_tokenizer = all((self.model_dir / n).is_file()
                            for n in ("tokenizer.json", "tokenizer_config.json"))
        kwargs = {"config": self.hf_config(), "tensors": self.state_tensors(), "out_dir": Path(out_dir),
                  "precisions": list(precisions),
                  "tokenizer_from": self.model_dir if has_tokenizer else None,
                  "write_safetensors": write_safetensors,
                  "source": {"source": "torch_learner", "base_model": self.model_dir.name,
                             "optimizer_steps": self.optimizer_steps, "lora_rank": self.config.lora_rank}}
        try:
            accepted = inspect.signature(export).parameters
            if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values()):
                kwargs = {k: v for k, v in kwargs.items() if k in accepted}
        except (TypeError, ValueError):
            pass
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        try:
            self.last_export = export(**kwargs)
        except LearnerError:
            raise
        except Exception as error:
            raise ModelError(f"ONNX export failed: {_one_line(error)}") from error
        return time.perf_counter() - started

    # -- checkpoints ---------------------------------------------------------------------------------

    def _trainable_state(self) -> dict:
        if self.is_lora:
            return {n: p.detach().clone() for n, p in self.model.named_parameters() if p.requires_grad}
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def save_checkpoint(self, path) -> Path:
        """Weights (all of them; with LoRA the adapter only, the base is the model folder's),
        optimizer state, RNG states and step counts, written atomically."""
        torch = _torch()
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        np_state = np.random.get_state()
        payload = {
            "format": CHECKPOINT_FORMAT,
            "version": CHECKPOINT_VERSION,
            "lora_rank": self.config.lora_rank,
            "config": json.dumps(self.config.to_dict()),
            "weights": self._trainable_state(),
            "optimizer": self.optimizer.state_dict(),
            "optimizer_steps": self.optimizer_steps,
            "updates": self.updates,
            "rng_torch": torch.get_rng_state(),
            "rng_cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "rng_numpy": [np_state[0], torch.from_numpy(np_state[1].astype(np.int64)), int(np_state[2]),
                          int(np_state[3]), float(np_state[4])],
            "rng_python": json.dumps(random.getstate()),
        }
        tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
        try:
            torch.save(payload, str(tmp))
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                tmp.unlink()
        return path

    def load_checkpoint(self, path) -> None:
        torch = _torch()
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"checkpoint {path} does not exist")
        try:
            payload = torch.load(str(path), map_location=self.device, weights_only=True)
        except Exception as error:
            raise ModelError(f"cannot read checkpoint {path}: {_one_line(error)}") from error
        if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
            raise ModelError(f"{path} is not a learner checkpoint")
        if payload.get("lora_rank") != self.config.lora_rank:
            raise ConfigError(f"checkpoint {path} has lora_rank {payload.get('lora_rank')}, this "
                              f"learner {self.config.lora_rank}")
        weights = payload["weights"]
        with torch.no_grad():
            if self.is_lora:
                params = dict(self.model.named_parameters())
                missing = [n for n, p in params.items() if p.requires_grad and n not in weights]
                if missing:
                    raise ModelError(f"checkpoint {path} lacks adapter weights such as {missing[0]}")
                for name, value in weights.items():
                    params[name].copy_(value)
            else:
                self.model.load_state_dict(weights, strict=True)
        self.optimizer.load_state_dict(payload["optimizer"])
        self.optimizer_steps = int(payload["optimizer_steps"])
        self.updates = int(payload["updates"])
        torch.set_rng_state(payload["rng_torch"].cpu())
        if payload["rng_cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all([s.cpu() for s in payload["rng_cuda"]])
        kind, keys, pos, has_gauss, cached = payload["rng_numpy"]
        np.random.set_state((kind, keys.cpu().numpy().astype(np.uint32), pos, has_gauss, cached))
        state = json.loads(payload["rng_python"])
        random.setstate((state[0], tuple(state[1]), state[2]))


def _load_converter(path: str | None):
    """Finds the ``frognano_models`` module: the given path, $FROGNANO_CONVERTER, an importable
    module, or the repository's llm/python folder next to this package."""
    candidates = [p for p in (path, os.environ.get(CONVERTER_ENV)) if p]
    for candidate in candidates:
        candidate = Path(candidate)
        file = candidate / "frognano_models.py" if candidate.is_dir() else candidate
        if not file.is_file():
            raise ModelError(f"converter {file} does not exist")
        loaded = sys.modules.get("frognano_models")
        if loaded is not None and Path(getattr(loaded, "__file__", "")).resolve() == file.resolve():
            return loaded
        _converter_folder_first(file.resolve().parent)
        spec = importlib.util.spec_from_file_location("frognano_models", file)
        module = importlib.util.module_from_spec(spec)
        sys.modules["frognano_models"] = module  # dataclasses look their module up while defining
        try:
            spec.loader.exec_module(module)
        except Exception as error:
            sys.modules.pop("frognano_models", None)
            raise ModelError(f"cannot import the converter {file}: {_one_line(error)}") from error
        return module
    try:
        return importlib.import_module("frognano_models")
    except ImportError:
        pass
    here = Path(__file__).resolve()
    for parent in here.parents:
        file = parent / "llm" / "python" / "frognano_models.py"
        if file.is_file():
            return _load_converter(str(file))
    raise ModelError("frognano_models is not importable; set the learner config 'converter' or "
                     f"${CONVERTER_ENV} to the path of frognano_models.py")


def _converter_folder_first(folder: Path) -> None:
    """Puts the converter's folder first on sys.path, so that its parts (the frognano_models_*.py
    files beside frognano_models.py, which it imports as top-level modules) load from there, and
    forgets parts loaded before from another folder (another converter's)."""
    for name, module in list(sys.modules.items()):
        if name.startswith("frognano_models_") and \
                Path(getattr(module, "__file__", None) or "").resolve().parent != folder:
            del sys.modules[name]
    if str(folder) in sys.path:
        sys.path.remove(str(folder))
    sys.path.insert(0, str(folder))
