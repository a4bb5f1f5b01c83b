"""What every part of the reference PyTorch learner (torch_learner.py) shares: its logger, the
error kinds of the serve protocol, the lazy torch import and two small helpers."""

from __future__ import annotations

import logging
import os
from pathlib import Path


log = logging.getLogger("frognano.torch_learner")


class LearnerError(Exception):
    """Base class; ``kind`` is the serve protocol's error kind."""

    kind = "internal"


class BatchError(LearnerError, ValueError):
    """The token batch is malformed."""

    kind = "batch"


class ConfigError(LearnerError, ValueError):
    """The learner configuration is invalid."""

    kind = "config"


class ModelError(LearnerError, RuntimeError):
    """The model could not be loaded, trained or exported."""

    kind = "model"


def _torch():
    import torch

    return torch


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= 500 else text[:497] + "..."
