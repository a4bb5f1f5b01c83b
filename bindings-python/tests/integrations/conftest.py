"""Fixtures of the trainer-integration tests (helpers: integration_support.py)."""

from pathlib import Path

import pytest

import frognano
from integration_support import TASKS


@pytest.fixture(scope="session")
def sandbox():
    return frognano.Sandbox()


@pytest.fixture(scope="session")
def tasks():
    return frognano.load_tasks(TASKS)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """A tiny random llama model: its fp32 folder is both an ONNX model folder (LocalModel) and
    a Hugging Face checkpoint with its tokenizer (transformers' from_pretrained)."""
    root = tmp_path_factory.mktemp("tiny-model")
    return Path(frognano.make_tiny_model(root, seed=0, progress=lambda message: None))
