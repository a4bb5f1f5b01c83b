"""A language model trained by the Rust GrpoTrainer from Python: LanguageModelPolicy (ONNX
Runtime rollouts, the PyTorch learner in a child process of this interpreter, ONNX hand-back,
checkpoints) on the tiny model. Needs the frognano[torch] extra (torch, transformers,
safetensors); skipped without."""

import json
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import frognano  # noqa: E402
from frognano.torch_learner import LearningOnnxPolicy, TorchLearner  # noqa: E402

TASKS = Path(__file__).resolve().parents[2] / "examples" / "tasks" / "sample.jsonl"


def test_grpo_trainer_trains_a_language_model_and_hands_its_weights_back(tmp_path):
    torch.set_num_threads(2)
    fp32 = frognano.make_tiny_model(tmp_path / "tiny", seed=0, progress=lambda message: None)
    # Two steps end without a submit: the episodes run out of budget, and are trained on. The
    # tiny model's replies run to their token limit and earn nothing: train on cut replies, and
    # a small KL term keeps an optimizer step when every advantage is 0.
    policy = LearningOnnxPolicy(fp32, {"learning_rate": 1e-3, "seed": 0,
                                       "mask_length_limited": False, "kl_coef": 0.01},
                                work_dir=tmp_path / "work",
                                generation={"max_new_tokens": 8, "temperature": 1.0})
    tasks = frognano.load_tasks(TASKS)[:1]
    trainer = frognano.GrpoTrainer(None, policy, tasks, tasks_per_iteration=1, group_size=2,
                                   drop_zero_variance=False, max_steps=2)
    metrics = trainer.iterate()
    stats = metrics["extra"]["learner"]
    assert math.isfinite(stats["loss"]) and stats["handback_s"] > 0, stats
    assert policy.updates == 1 and stats["updates"] == 1
    assert (policy.weights / "model.onnx").is_file()
    assert policy.weights.parent == Path(policy.work_dir) / "weights"
    # The policy now runs the learner's weights: an act's log-probs are those the learner
    # computes for the same tokens with the handed-back weights.
    context = {"task_id": "t", "initial": {"text": "fix add()"}, "history": []}
    [output] = policy.act([context])
    assert output["prompt_ids"] and len(output["logprobs"]) == len(output["token_ids"])
    checkpoint = policy.state()
    json.dumps(checkpoint)
    learner = TorchLearner(fp32, {"seed": 0})
    learner.load_checkpoint(checkpoint["learner_checkpoint"])
    one_step = {
        "iteration": 0, "estimator": "grpo", "group_size": 1, "trajectories": [{
            "task_id": "t", "group": 0, "reward": 1.0, "advantage": 1.0, "resolved": True,
            "truncated": False,
            "steps": [{"action": output["action"], "observation": "", **{k: output[k] for k in
                       ("logprobs", "prompt_ids", "token_ids", "loss_mask", "decision")}}]}]}
    recomputed = learner.logprobs(frognano.token_batch(one_step))
    assert len(recomputed) == len(output["logprobs"])
    assert max(abs(a - b) for a, b in zip(recomputed, output["logprobs"])) < 2e-3
    # A checkpoint restores the same weights after another update.
    saved = (policy.weights / "model.onnx.data").read_bytes()
    trainer.iterate()
    policy.load_state(checkpoint)
    assert (policy.weights / "model.onnx.data").read_bytes() == saved


def test_training_rollouts_sample_by_default_and_greedy_ones_are_refused(tmp_path):
    fp32 = frognano.make_tiny_model(tmp_path / "tiny", seed=0, progress=lambda message: None)
    with pytest.raises(frognano.ConfigError, match="greedy"):
        LearningOnnxPolicy(fp32, {"seed": 0}, work_dir=tmp_path / "greedy",
                           generation={"temperature": 0.0, "max_new_tokens": 4})
    policy = LearningOnnxPolicy(fp32, {"seed": 0}, work_dir=tmp_path / "work",
                                generation={"max_new_tokens": 4})
    assert LearningOnnxPolicy is frognano.LanguageModelPolicy
    assert "temperature=1" in repr(policy), repr(policy)
    contexts = [{"task_id": "t", "initial": {"text": "fix add()"}, "history": []}] * 4
    outputs = policy.act(contexts)
    assert outputs[0]["decision"]["temperature"] == 1.0
    # Sampled, not greedy: four rollouts of one prompt are not all the same.
    assert len({tuple(o["token_ids"]) for o in outputs}) > 1
