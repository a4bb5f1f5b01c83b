"""The serve protocol (JSON lines on stdin/stdout, see torch_learner.py's docstring) and what the
command line shares with it."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

if __package__:  # frognano._learner_serve, inside the package
    from ._learner_common import ConfigError, LearnerError, _one_line, log
    from ._learner_config import LearnerConfig
    from ._learner_model import TorchLearner
else:  # a top-level module beside torch_learner.py (see its imports)
    from _learner_common import ConfigError, LearnerError, _one_line, log
    from _learner_config import LearnerConfig
    from _learner_model import TorchLearner


def _error_kind(error: BaseException) -> str:
    if isinstance(error, LearnerError):
        return error.kind
    if isinstance(error, OSError):
        return "io"
    return "internal"


class Server:
    """The JSON-lines protocol (see torch_learner.py's docs)."""

    def __init__(self):
        self.learner: TorchLearner | None = None

    def _need(self) -> TorchLearner:
        if self.learner is None:
            raise LearnerError("no model loaded: send an init request first")
        return self.learner

    @staticmethod
    def _field(request: dict, name: str, kind=str):
        if name not in request:
            raise LearnerError(f"bad request: op {request.get('op')!r} needs the field {name!r}")
        value = request[name]
        if not isinstance(value, kind):
            raise LearnerError(f"bad request: field {name!r} must be a {kind.__name__}")
        return value

    def handle(self, request) -> dict:
        if not isinstance(request, dict):
            raise LearnerError("bad request: expected a JSON object")
        op = request.get("op")
        if op == "init":
            config = request.get("config") or {}
            if not isinstance(config, dict):
                raise ConfigError("config must be a JSON object")
            config = LearnerConfig.from_dict(config)
            self.learner = None
            self.learner = TorchLearner(self._field(request, "model"), config)
            return {"ok": True, "device": str(self.learner.device),
                    "parameters": self.learner.parameter_count(),
                    "trainable": self.learner.trainable_count()}
        if op == "learn":
            return {"ok": True, "stats": self._need().learn(self._field(request, "batch"))}
        if op == "logprobs":
            from safetensors.numpy import save_file

            learner = self._need()
            logprobs = learner.logprobs(self._field(request, "batch"))
            out = Path(self._field(request, "out"))
            tmp = out.with_name(f".{out.name}.tmp{os.getpid()}")
            save_file({"logprobs": logprobs}, str(tmp))
            os.replace(tmp, out)
            return {"ok": True}
        if op == "export_onnx":
            precisions = request.get("precisions", ["fp32"])
            if not isinstance(precisions, list) or not all(isinstance(p, str) for p in precisions):
                raise LearnerError("bad request: precisions must be a list of strings")
            write_safetensors = request.get("write_safetensors", True)
            if not isinstance(write_safetensors, bool):
                raise LearnerError("bad request: write_safetensors must be true or false")
            learner = self._need()
            seconds = learner.export_onnx(self._field(request, "dir"), precisions, write_safetensors)
            reply = {"ok": True, "seconds": seconds}
            if isinstance(learner.last_export, dict) and "folders" in learner.last_export:
                reply["folders"] = learner.last_export["folders"]
            return reply
        if op == "save_hf":
            self._need().save_hf(self._field(request, "dir"))
            return {"ok": True}
        if op == "save":
            self._need().save_checkpoint(self._field(request, "path"))
            return {"ok": True}
        if op == "load":
            self._need().load_checkpoint(self._field(request, "path"))
            return {"ok": True}
        if op == "shutdown":
            return {"ok": True}
        raise LearnerError(f"bad request: unknown op {op!r}")

    def serve(self, stdin, stdout) -> int:
        for line in stdin:
            line = line.strip()
            if not line:
                continue
            op = None
            try:
                request = json.loads(line)
                op = request.get("op") if isinstance(request, dict) else None
                reply = self.handle(request)
            except json.JSONDecodeError as error:
                reply = {"ok": False, "error": f"bad request: not JSON ({error})", "kind": "internal"}
            except Exception as error:  # a bad request must never end the server
                if not isinstance(error, (LearnerError, OSError)):
                    log.exception("request %r failed", op)
                reply = {"ok": False, "error": _one_line(error), "kind": _error_kind(error)}
            stdout.write(json.dumps(_sanitize(reply)) + "\n")
            stdout.flush()
            if op == "shutdown" and reply.get("ok"):
                return 0
        return 0


def _sanitize(value):
    """Non-finite floats become null (JSON has no NaN)."""
    if isinstance(value, dict):
        return {k: _sanitize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_sanitize(v) for v in value]
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, Path):
        return str(value)
    return value


def _parse_config_arg(text: str | None) -> dict:
    if not text:
        return {}
    path = Path(text)
    try:
        source = path.read_text() if not text.lstrip().startswith("{") and path.is_file() else text
        config = json.loads(source)
    except (ValueError, OSError) as error:
        raise ConfigError(f"--config is neither a JSON object nor a JSON file: {error}") from error
    if not isinstance(config, dict):
        raise ConfigError("--config must be a JSON object")
    return config
