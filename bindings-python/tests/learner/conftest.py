"""Fixtures for the PyTorch learner tests.

torch_learner.py is loaded by file path, so these tests need neither the compiled frognano
extension nor an installed package: only numpy, torch, transformers, safetensors and peft.
(pytest.ini here keeps pytest from loading the parent folder's conftest, which needs frognano.)
"""

import importlib.util
import json

import pytest

REQUIRED = ("numpy", "torch", "transformers", "safetensors")
MISSING = [name for name in REQUIRED if importlib.util.find_spec(name) is None]
if MISSING:
    # An environment without the learner's packages (the wheel's test venv) skips these tests.
    collect_ignore_glob = ["test_*.py"]
else:
    import torch
    from learner_support import VOCAB


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """A tiny random llama checkpoint (config.json + model.safetensors + a tokenizer file)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(1234)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    model = LlamaForCausalLM(config)
    # Larger-than-default weights so that the tiny model's distributions are not nearly uniform.
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.ndim == 2:
                parameter.normal_(0.0, 0.2)
    out = tmp_path_factory.mktemp("tiny-llama")
    model.save_pretrained(out, safe_serialization=True)
    (out / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 256}))
    (out / "tokenizer.json").write_text(json.dumps(
        {"version": "1.0", "model": {"type": "BPE", "vocab": {f"t{i}": i for i in range(VOCAB)}, "merges": []}}))
    assert (out / "model.safetensors").is_file()
    return out
