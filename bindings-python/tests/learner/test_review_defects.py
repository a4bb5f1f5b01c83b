"""The learner's contract where a review found it broken: what is masked, when the weights count
as updated, when no step is taken, which distribution the log-probs are of, and the first
batch's check of the rollout log-probs (real torch on a tiny random llama)."""

import logging

import numpy as np
import pytest
import torch
from learner_support import assert_same_weights, make_trajectories, on_policy, step_logits, tl, weights

BASE = {"learning_rate": 1e-3, "micro_batch_size": 4, "seed": 0, "device": "cpu"}


def learner_with(tiny_model, **overrides):
    return tl.TorchLearner(tiny_model, {**BASE, **overrides})


def test_default_mask_drops_cut_replies_not_trajectories_out_of_steps():
    batch = tl.build_batch(make_trajectories(seed=3, n=4, steps=2))
    batch["truncated"][1] = 1  # trajectory 1 ran out of steps (it is still graded)
    batch["length_limited"][0] = 1  # step 0's reply was cut at the token limit
    co = batch["completion_offsets"]
    mask = tl.trained_token_mask(batch)
    for s in range(len(batch["temperatures"])):
        assert mask[co[s]:co[s + 1]].all() == (s != 0), s
    # The old behaviour stays available.
    old = tl.trained_token_mask(batch, mask_truncated=True, mask_length_limited=False)
    steps_of_1 = set(np.flatnonzero(batch["step_trajectory"] == 1))
    for s in range(len(batch["temperatures"])):
        assert old[co[s]:co[s + 1]].all() == (s not in steps_of_1), s


def test_a_resolved_trajectory_that_ran_out_of_steps_is_trained(tiny_model):
    learner = learner_with(tiny_model)
    batch = on_policy(learner, tl.build_batch(make_trajectories(seed=6, n=2, advantages=[1.0, -1.0])))
    batch["truncated"][:] = 1
    batch["resolved"][0] = 1
    stats = learner.learn(batch)
    assert stats["learner_tokens"] == int(batch["loss_mask"].sum())
    assert stats["updated"] is True and stats["masked_fraction"] == 0.0


def test_a_batch_mostly_cut_at_the_limit_warns(tiny_model, caplog):
    learner = learner_with(tiny_model)
    batch = on_policy(learner, tl.build_batch(make_trajectories(seed=7, n=2, steps=2)))
    batch["length_limited"][:3] = 1  # three of four steps
    with caplog.at_level(logging.WARNING, logger="frognano.torch_learner"):
        stats = learner.learn(batch)
    assert stats["masked_fraction"] > 0.5
    assert any("carry no loss" in r.getMessage() for r in caplog.records)


def test_one_skipped_minibatch_still_counts_as_an_update(tiny_model):
    learner = learner_with(tiny_model, minibatches=2, max_initial_log_ratio=0)
    # The second minibatch's advantage overflows the gradient norm: its step is skipped, the
    # first minibatch's step changed the weights.
    batch = tl.build_batch(make_trajectories(seed=8, n=4, advantages=[1.0, -1.0, 3e38, -3e38]))
    before = weights(learner)
    stats = learner.learn(batch)
    assert "skipped" in stats and stats["optimizer_steps"] == 1
    assert stats["updated"] is True
    changed = weights(learner)
    assert any(not np.array_equal(before[k], changed[k]) for k in before)
    # Every minibatch skipped: not updated, weights as they were.
    batch = tl.build_batch(make_trajectories(seed=9, n=2, advantages=[3e38, -3e38]))
    stats = learner_with(tiny_model, max_initial_log_ratio=0).learn(batch)
    assert stats["optimizer_steps"] == 0 and stats["updated"] is False


def test_all_zero_advantages_take_no_optimizer_step(tiny_model):
    learner = learner_with(tiny_model)
    first = on_policy(learner, tl.build_batch(make_trajectories(seed=10, n=2, advantages=[1.0, -1.0])))
    assert learner.learn(first)["updated"] is True  # AdamW now has momentum
    steps = learner.optimizer_steps
    before = weights(learner)
    flat = on_policy(learner, tl.build_batch(make_trajectories(seed=11, n=2, advantages=[0.0, 0.0])))
    stats = learner.learn(flat)
    assert stats["updated"] is False and stats["skipped"] == "every advantage is 0"
    assert learner.optimizer_steps == steps
    assert_same_weights(before, weights(learner))
    # With a KL term there is still something to optimise.
    kl = learner_with(tiny_model, kl_coef=0.1)
    kl.learn(on_policy(kl, tl.build_batch(make_trajectories(seed=10, n=2, advantages=[1.0, -1.0]))))
    stats = kl.learn(on_policy(kl, flat))
    assert stats["updated"] is True


def truncated_logprobs(logits, target, top_k, top_p):
    """log-prob of target under the top-k, then top-p kept set (target kept), renormalised."""
    logits = logits.double()
    order = torch.argsort(logits, descending=True)
    keep = torch.zeros_like(logits, dtype=torch.bool)
    k = top_k if top_k > 0 else len(logits)
    kept = order[:k]
    probs = torch.softmax(logits[kept], -1)
    total = 0.0
    for rank, token in enumerate(kept.tolist()):
        keep[token] = True
        total += float(probs[rank])
        if total >= top_p:
            break
    keep[target] = True
    masked = logits.masked_fill(~keep, float("-inf"))
    return float(torch.log_softmax(masked, -1)[target])


@pytest.mark.parametrize("temperature,top_k,top_p", [(0.7, 5, 1.0), (1.0, 0, 0.6), (1.3, 8, 0.8)])
def test_logprobs_are_those_of_the_truncated_distribution(tiny_model, temperature, top_k, top_p):
    learner = learner_with(tiny_model)
    trajectories = make_trajectories(seed=12, n=2, temperature=temperature)
    for step in (s for t in trajectories for s in t["steps"]):
        step["top_k"], step["top_p"] = top_k, top_p
    batch = tl.build_batch(trajectories)
    got = learner.logprobs(batch)
    co = batch["completion_offsets"]
    for s, prompt_len, completion, logits in step_logits(learner.model, batch):
        for i, token in enumerate(completion):
            want = truncated_logprobs(logits[prompt_len - 1 + i] / temperature, int(token), top_k, top_p)
            assert got[co[s] + i] == pytest.approx(want, abs=2e-5), (s, i)
    # Truncation never gives a drawn token -inf, and entropy stays finite in training.
    assert np.isfinite(got).all()
    stats = learner.learn(on_policy(learner, batch))
    assert np.isfinite(stats["entropy"]) and stats["mean_ratio"] == pytest.approx(1.0, abs=1e-5)


def test_first_batch_with_temperature_one_logprobs_at_another_temperature_fails(tiny_model):
    learner = learner_with(tiny_model)
    batch = tl.build_batch(make_trajectories(seed=13, n=2, temperature=1.0))
    batch = on_policy(learner, batch)  # log-probs of the model's own distribution
    batch["temperatures"][:] = 0.5  # ... reported for rollouts sampled at T = 0.5
    with pytest.raises(tl.BatchError, match="temperature 1"):
        learner.learn(batch)
    # Far-off log-probs fail whatever the cause; the check can be turned off.
    off = tl.build_batch(make_trajectories(seed=13, n=2))
    with pytest.raises(tl.BatchError, match="not this policy's"):
        learner_with(tiny_model).learn(off)
    assert learner_with(tiny_model, max_initial_log_ratio=0).learn(off)["updated"] is True
    # Honest log-probs at T = 0.5 pass.
    honest = tl.build_batch(make_trajectories(seed=13, n=2, temperature=0.5))
    fresh = learner_with(tiny_model)
    assert fresh.learn(on_policy(fresh, honest))["updated"] is True
