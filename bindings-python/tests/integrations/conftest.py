"""Fixtures of the trainer-integration tests (helpers: integration_support.py)."""

from pathlib import Path

import pytest

import frognano
from integration_support import REQUIRED, TASKS
from serving import cli_path, frognano_serve


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


@pytest.fixture(scope="module")
def server(tiny_model):
    """`frognano serve` of the tiny model on a free loopback port (one per module); its /v1 URL."""
    cli = cli_path()
    if cli is None:
        message = "the CLI is not built (cargo build), or set FROGNANO_CLI"
        if REQUIRED:
            pytest.fail(message)
        pytest.skip(message)
    with frognano_serve(cli, tiny_model) as url:
        yield url
