"""Token batch files: round trip and validation."""

import json

import numpy as np
import pytest
from learner_support import make_trajectories, tl


def good():
    return tl.build_batch(make_trajectories(seed=3))


def test_round_trip(tmp_path):
    batch = good()
    path = tl.write_batch(tmp_path / "b.safetensors", batch, batch["metadata"])
    loaded = tl.load_batch(path, vocab_size=61)
    assert loaded["metadata"]["format"] == "frognano-token-batch"
    assert loaded["metadata"]["version"] == "1"
    assert json.loads(loaded["metadata"]["task_ids"]) == ["t0", "t1", "t2", "t3"]
    for name in tl.BATCH_TENSORS:
        assert loaded[name].dtype == tl.BATCH_TENSORS[name][1], name
        assert np.array_equal(loaded[name], batch[name]), name
    assert len(loaded["temperatures"]) == 8 and len(loaded["advantages"]) == 4


def write_and_load(tmp_path, batch, metadata=None, vocab_size=61):
    path = tl.write_batch(tmp_path / "bad.safetensors", batch, metadata or batch.get("metadata"))
    return tl.load_batch(path, vocab_size=vocab_size)


@pytest.mark.parametrize("mutate, message", [
    (lambda b: b.update(loss_mask=b["loss_mask"][:-1]), "loss_mask has .* expected"),
    (lambda b: b.update(rollout_logprobs=b["rollout_logprobs"][1:]), "rollout_logprobs has"),
    (lambda b: b.update(advantages=np.array([0.1, np.nan, 0.2, 0.3], np.float32)),
     "advantages holds a non-finite"),
    (lambda b: b.update(step_advantages=np.full(8, np.inf, np.float32)), "step_advantages holds a non-finite"),
    (lambda b: b.pop("prompt_ids"), "missing tensor 'prompt_ids'"),
    (lambda b: b.update(prompt_offsets=np.concatenate([[0, 0], b["prompt_offsets"][2:]])),
     "step 0 has an empty prompt"),
    (lambda b: b.update(completion_offsets=b["completion_offsets"][[0, 2, 1, 3, 4, 5, 6, 7, 8]]),
     "completion_offsets are not monotone"),
    (lambda b: b.update(completion_offsets=b["completion_offsets"] * 1 + np.r_[0, np.zeros(7, int), 1]),
     "completion_offsets ends at"),
    (lambda b: b.update(completion_ids=np.where(np.arange(len(b["completion_ids"])) == 2, 61,
                                                b["completion_ids"])), "outside the model's vocabulary of 61"),
    (lambda b: b.update(rollout_logprobs=np.where(np.arange(len(b["rollout_logprobs"])) == 1, np.nan,
                                                  b["rollout_logprobs"]).astype(np.float32)),
     "rollout_logprobs holds a non-finite value at trained token 1"),
    (lambda b: b.update(rollout_logprobs=np.full(len(b["rollout_logprobs"]), 0.5, np.float32)),
     "is positive"),
    (lambda b: b.update(step_trajectory=b["step_trajectory"][::-1].copy()), "trajectory order"),
    (lambda b: b.update(step_trajectory=b["step_trajectory"] + 1), "refers to trajectory 4"),
])
def test_bad_batches_raise_batch_error(tmp_path, mutate, message):
    batch = good()
    mutate(batch)
    with pytest.raises(tl.BatchError, match=message):
        write_and_load(tmp_path, batch)
    # The same checks run on an in-memory dict.
    with pytest.raises(tl.BatchError, match=message):
        tl.validate_batch(batch, vocab_size=61)


def test_masked_tokens_may_hold_any_logprob(tmp_path):
    batch = good()
    batch["loss_mask"][1] = 0
    batch["rollout_logprobs"][1] = np.nan
    write_and_load(tmp_path, batch)


def test_bad_metadata(tmp_path):
    batch = good()
    with pytest.raises(tl.BatchError, match="format is 'something-else'"):
        write_and_load(tmp_path, batch, {**batch["metadata"], "format": "something-else"})
    with pytest.raises(tl.BatchError, match="unsupported batch version '2'"):
        write_and_load(tmp_path, batch, {**batch["metadata"], "version": "2"})
    with pytest.raises(tl.BatchError, match="task_ids must list one id per trajectory"):
        write_and_load(tmp_path, batch, {**batch["metadata"], "task_ids": '["a"]'})


def test_unreadable_file(tmp_path):
    (tmp_path / "junk").write_bytes(b"not a safetensors file")
    with pytest.raises(tl.BatchError, match="not a readable safetensors file"):
        tl.load_batch(tmp_path / "junk")
    with pytest.raises(tl.BatchError, match="does not exist"):
        tl.load_batch(tmp_path / "missing")


def test_trained_mask_drops_truncated_trajectories():
    batch = good()
    batch["truncated"][1] = 1
    mask = tl.trained_token_mask(batch, mask_truncated=True)
    co = batch["completion_offsets"]
    steps_of_1 = np.flatnonzero(batch["step_trajectory"] == 1)
    for s in range(8):
        assert mask[co[s]:co[s + 1]].all() == (s not in steps_of_1)
    assert tl.trained_token_mask(batch, mask_truncated=False).all()


def test_config_errors():
    with pytest.raises(tl.ConfigError, match="unknown learner config key.*learning_rat\\b"):
        tl.LearnerConfig.from_dict({"learning_rat": 1e-5})
    with pytest.raises(tl.ConfigError, match="normalization must be one of"):
        tl.LearnerConfig.from_dict({"normalization": "mean"})
    with pytest.raises(tl.ConfigError, match="ratio_cap"):
        tl.LearnerConfig.from_dict({"ratio_cap": 1.1})
    assert tl.LearnerConfig().resolved_learning_rate() == 1e-6
    assert tl.LearnerConfig(lora_rank=8).resolved_learning_rate() == 1e-5
