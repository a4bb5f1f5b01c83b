"""Checkpoints, Hugging Face export, LoRA and the ONNX hand-off."""

import json

import numpy as np
import pytest
import torch
from learner_support import assert_same_weights, make_trajectories, on_policy, tl, weights

FAST = {"learning_rate": 1e-3, "micro_batch_size": 4, "seed": 0, "device": "cpu",
        # These batches carry made-up rollout log-probs on purpose (off-policy ratios).
        "max_initial_log_ratio": 0}


def batch_for(learner, seed):
    return on_policy(learner, tl.build_batch(make_trajectories(seed=seed, n=3)))


def test_checkpoint_round_trip_continues_identically(tiny_model, tmp_path):
    one = tl.TorchLearner(tiny_model, FAST)
    first, second = batch_for(one, 20), batch_for(one, 21)
    one.learn(first)
    path = one.save_checkpoint(tmp_path / "ckpt" / "learner.pt")
    assert path.is_file() and not list(path.parent.glob(".*tmp*"))
    saved = weights(one)
    np_draw, py_draw, torch_draw = np.random.rand(), __import__("random").random(), torch.rand(1)
    one.learn(second)
    after_one = weights(one)

    two = tl.TorchLearner(tiny_model, FAST)
    two.load_checkpoint(path)
    assert_same_weights(saved, weights(two))
    assert two.optimizer_steps == 1
    # RNG states come back too.
    assert np.random.rand() == np_draw and __import__("random").random() == py_draw
    assert torch.equal(torch.rand(1), torch_draw)
    # The optimizer state came back: the next update is bitwise the same.
    two.learn(second)
    assert_same_weights(after_one, weights(two))


def test_checkpoint_errors(tiny_model, tmp_path):
    learner = tl.TorchLearner(tiny_model, FAST)
    with pytest.raises(FileNotFoundError):
        learner.load_checkpoint(tmp_path / "none.pt")
    (tmp_path / "junk.pt").write_bytes(b"junk")
    with pytest.raises(tl.ModelError, match="cannot read checkpoint"):
        learner.load_checkpoint(tmp_path / "junk.pt")


def test_save_hf_reloads_as_the_same_policy(tiny_model, tmp_path):
    learner = tl.TorchLearner(tiny_model, FAST)
    batch = batch_for(learner, 22)
    learner.learn(batch)
    out = learner.save_hf(tmp_path / "hf")
    assert {p.name for p in out.iterdir()} >= {"config.json", "model.safetensors", "tokenizer_config.json"}
    assert json.loads((out / "config.json").read_text())["model_type"] == "llama"
    reloaded = tl.TorchLearner(out, FAST)
    assert_same_weights(weights(learner), weights(reloaded))
    np.testing.assert_array_equal(learner.logprobs(batch), reloaded.logprobs(batch))


def test_lora_trains_and_merges(tiny_model, tmp_path):
    pytest.importorskip("peft")
    config = {**FAST, "lora_rank": 4, "lora_alpha": 8, "learning_rate": 1e-2}
    learner = tl.TorchLearner(tiny_model, config)
    base = tl.TorchLearner(tiny_model, FAST)
    assert learner.trainable_count() < learner.parameter_count() // 2
    start = weights(learner)
    assert_same_weights(start, weights(base))  # B starts at zero: merged = base, same HF names
    batch = on_policy(learner, tl.build_batch(make_trajectories(seed=23, n=3, advantages=[1.0, 1.0, 1.0])))
    trained = batch["loss_mask"] == 1
    before = learner.logprobs(batch)[trained].mean()
    learner.learn(batch)
    learner.learn(batch)
    after = learner.logprobs(batch)
    assert after[trained].mean() > before
    merged = weights(learner)
    changed = [k for k in merged if not np.array_equal(merged[k], start[k])]
    assert changed and all(any(m in k for m in tl.DEFAULT_TARGET_MODULES) for k in changed)
    assert "model.layers.0.self_attn.q_proj.weight" in changed
    # The merged weights are the adapted policy: a plain model from save_hf scores the same.
    reloaded = tl.TorchLearner(learner.save_hf(tmp_path / "merged"), FAST)
    np.testing.assert_allclose(reloaded.logprobs(batch), after, rtol=0, atol=2e-5)
    # LoRA checkpoints hold the adapter and restore it exactly.
    path = learner.save_checkpoint(tmp_path / "lora.pt")
    other = tl.TorchLearner(tiny_model, config)
    other.load_checkpoint(path)
    assert_same_weights(merged, weights(other))
    with pytest.raises(tl.ConfigError, match="lora_rank"):
        base.load_checkpoint(path)


def test_lora_kl_uses_the_base_policy(tiny_model):
    pytest.importorskip("peft")
    learner = tl.TorchLearner(tiny_model, {**FAST, "lora_rank": 2, "kl_coef": 0.5, "learning_rate": 1e-2})
    assert learner.reference is None
    batch = on_policy(learner, tl.build_batch(make_trajectories(seed=24, n=2)))
    assert learner.learn(batch)["kl"] == pytest.approx(0.0, abs=1e-6)
    assert learner.learn(batch)["kl"] > 0


CONVERTER = '''
import json
from pathlib import Path

def export_onnx(config, tensors, out_dir, precisions=("fp32",), tokenizer_from=None,
                write_safetensors=True, source=None):
    Path(out_dir, "handed.json").write_text(json.dumps({
        "model_type": config["model_type"], "precisions": list(precisions),
        "tokenizer_from": str(tokenizer_from), "write_safetensors": write_safetensors,
        "names": sorted(tensors), "dtypes": sorted({str(t.dtype) for t in tensors.values()}),
        "q0": float(tensors["model.layers.0.self_attn.q_proj.weight"][0, 0])}))
'''


def test_export_onnx_hands_the_weights_to_the_converter(tiny_model, tmp_path):
    converter = tmp_path / "frognano_models.py"
    converter.write_text(CONVERTER)
    learner = tl.TorchLearner(tiny_model, {**FAST, "converter": str(converter)})
    seconds = learner.export_onnx(tmp_path / "onnx", ["fp32", "int4"])
    assert seconds >= 0
    handed = json.loads((tmp_path / "onnx" / "handed.json").read_text())
    state = learner.state_tensors()
    assert handed["names"] == sorted(state) and handed["dtypes"] == ["float32"]
    assert handed["precisions"] == ["fp32", "int4"] and handed["model_type"] == "llama"
    assert handed["q0"] == pytest.approx(float(state["model.layers.0.self_attn.q_proj.weight"][0, 0]))
    assert handed["tokenizer_from"] == str(tiny_model) and handed["write_safetensors"] is True
    missing = tl.TorchLearner(tiny_model, {**FAST, "converter": str(tmp_path / "nope.py")})
    with pytest.raises(tl.ModelError, match="does not exist"):
        missing.export_onnx(tmp_path / "x")


def test_export_onnx_with_the_project_converter_matches_the_learner(tiny_model, tmp_path):
    """End to end: the learner's updated weights, exported by frognano_models and run in
    onnxruntime, score the batch as the learner does."""
    converter = tl.MODULE_DIR.parents[2] / "llm" / "python" / "frognano_models.py"
    if not converter.is_file() or "export_onnx" not in converter.read_text():
        pytest.skip("frognano_models.export_onnx is not available")
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    learner = tl.TorchLearner(tiny_model, {**FAST, "converter": str(converter)})
    batch = batch_for(learner, 25)
    learner.learn(batch)
    learner.export_onnx(tmp_path / "onnx", ["fp32"])
    folder = tmp_path / "onnx" / "fp32"
    assert (folder / "model.onnx").is_file() and (folder / "tokenizer.json").is_file()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(str(folder / "model.onnx"), options, providers=["CPUExecutionProvider"])
    config = json.loads((tiny_model / "config.json").read_text())
    kv, head_dim = config["num_key_value_heads"], config["hidden_size"] // config["num_attention_heads"]
    want = learner.logprobs(batch)
    po, co = batch["prompt_offsets"], batch["completion_offsets"]
    for s in range(len(batch["temperatures"])):
        ids = np.concatenate([batch["prompt_ids"][po[s]:po[s + 1]], batch["completion_ids"][co[s]:co[s + 1]]])
        feeds = {"input_ids": ids[None], "attention_mask": np.ones((1, len(ids)), np.int64),
                 "position_ids": np.arange(len(ids), dtype=np.int64)[None]}
        for i in range(config["num_hidden_layers"]):
            for part in ("key", "value"):
                feeds[f"past_key_values.{i}.{part}"] = np.zeros((1, kv, 0, head_dim), np.float32)
        names = {i.name for i in session.get_inputs()}
        logits = session.run(["logits"], {k: v for k, v in feeds.items() if k in names})[0][0]
        logp = torch.log_softmax(torch.from_numpy(logits).double(), -1).numpy()
        n_prompt = po[s + 1] - po[s]
        completion = batch["completion_ids"][co[s]:co[s + 1]]
        got = logp[np.arange(n_prompt - 1, len(ids) - 1), completion]
        np.testing.assert_allclose(got, want[co[s]:co[s + 1]], rtol=0, atol=1e-4)


def test_tied_embeddings_export_without_lm_head(tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(5)
    config = LlamaConfig(vocab_size=61, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True)
    LlamaForCausalLM(config).save_pretrained(tmp_path / "tied")
    learner = tl.TorchLearner(tmp_path / "tied", FAST)
    batch = batch_for(learner, 26)
    learner.learn(batch)
    state = learner.state_tensors()
    assert "lm_head.weight" not in state and "model.embed_tokens.weight" in state
    reloaded = tl.TorchLearner(learner.save_hf(tmp_path / "out"), FAST)
    np.testing.assert_array_equal(reloaded.logprobs(batch), learner.logprobs(batch))
