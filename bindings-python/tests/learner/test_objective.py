"""The policy-gradient update on a tiny random llama (real torch, no mocks)."""

import numpy as np
import pytest
import torch
from learner_support import assert_same_weights, make_trajectories, on_policy, step_logits, tl, weights

FAST = {"learning_rate": 1e-3, "micro_batch_size": 3, "seed": 0, "device": "cpu",
        # These batches carry made-up rollout log-probs on purpose (off-policy ratios).
        "max_initial_log_ratio": 0}


@pytest.fixture(scope="module")
def learner(tiny_model):
    return tl.TorchLearner(tiny_model, FAST)


def fresh(tiny_model, **overrides):
    return tl.TorchLearner(tiny_model, {**FAST, **overrides})


@pytest.mark.parametrize("temperature", [1.0, 0.7, 0.0])
def test_logprobs_match_a_plain_forward(learner, temperature):
    batch = tl.build_batch(make_trajectories(seed=1, n=3, temperature=temperature))
    got = learner.logprobs(batch)
    model = learner.model
    t = 1.0 if temperature <= 1e-5 else temperature
    co = batch["completion_offsets"]
    for s, prompt_len, completion, logits in step_logits(model, batch):
        logp = torch.log_softmax(logits / t, -1)[prompt_len - 1:-1]
        want = logp.gather(1, torch.from_numpy(completion)[:, None])[:, 0].numpy()
        np.testing.assert_allclose(got[co[s]:co[s + 1]], want, rtol=0, atol=2e-5)


def mean_logprob(learner, batch, mask):
    return float(learner.logprobs(batch)[mask].mean())


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_advantage_sign_moves_logprobs(tiny_model, sign):
    learner = fresh(tiny_model)
    batch = on_policy(learner, tl.build_batch(make_trajectories(seed=2, n=2, advantages=[sign, sign])))
    # Mask the first token of every step: it must still be scored, but not trained.
    batch["loss_mask"][batch["completion_offsets"][:-1]] = 0
    trained = batch["loss_mask"] == 1
    before = mean_logprob(learner, batch, trained)
    stats = learner.learn(batch)
    after = mean_logprob(learner, batch, trained)
    assert stats["learner_tokens"] == int(trained.sum())
    assert stats["grad_norm"] > 0
    assert stats["mean_ratio"] == pytest.approx(1.0, abs=1e-5)
    assert stats["clip_fraction"] == 0.0
    assert (after - before) * sign > 0.01, (before, after)


def test_masked_tokens_get_no_gradient(tiny_model):
    trajectories = make_trajectories(seed=4, n=2, advantages=[1.0, -0.5])
    batch_a = tl.build_batch(trajectories)
    # Batch B differs only in masked tokens appended to each completion (after every trained
    # token, so no trained token sees them), with garbage rollout log-probs.
    for step in (s for t in trajectories for s in t["steps"]):
        step["completion"] = step["completion"] + [5, 9, 11]
        step["logprobs"] = step["logprobs"] + [float("nan")] * 3
        step["mask"] = [1] * (len(step["completion"]) - 3) + [0, 0, 0]
    batch_b = tl.build_batch(trajectories)
    # eps = 1: Adam's first step is about lr * gradient, not lr * sign(gradient) (see below).
    one, two = fresh(tiny_model, eps=1.0), fresh(tiny_model, eps=1.0)
    batch_a = on_policy(one, batch_a)
    keep = batch_b["loss_mask"] == 1
    batch_b["rollout_logprobs"][keep] = batch_a["rollout_logprobs"]
    stats_a, stats_b = one.learn(batch_a), two.learn(batch_b)
    assert stats_a["learner_tokens"] == stats_b["learner_tokens"]
    assert stats_a["loss"] == pytest.approx(stats_b["loss"], rel=1e-6)
    a, b = weights(one), weights(two)
    for key in a:
        np.testing.assert_allclose(a[key], b[key], rtol=0, atol=1e-8, err_msg=key)


def test_all_masked_batch_is_a_no_op(tiny_model):
    learner = fresh(tiny_model)
    batch = tl.build_batch(make_trajectories(seed=5, n=2))
    batch["loss_mask"][:] = 0
    before = weights(learner)
    stats = learner.learn(batch)
    assert stats["learner_tokens"] == 0 and stats["skipped"] == "no trained tokens"
    assert stats["optimizer_steps"] == 0
    assert_same_weights(before, weights(learner))
    # Replies cut at the token limit are masked too (mask_length_limited defaults to true).
    batch = tl.build_batch(make_trajectories(seed=5, n=2))
    batch["length_limited"][:] = 1
    stats = learner.learn(batch)
    assert stats["learner_tokens"] == 0 and stats["updated"] is False
    assert_same_weights(before, weights(learner))


def grad_norm_of(learner, batch):
    return learner.learn(batch)["grad_norm"]


def shifted(learner, batch, shift):
    """The batch with rollout log-probs such that ratio = exp(shift) on every token."""
    batch = on_policy(learner, batch)
    batch["rollout_logprobs"] = (batch["rollout_logprobs"] - shift).astype(np.float32)
    return batch


def test_clipped_ratios_give_no_gradient(tiny_model):
    learner = fresh(tiny_model, max_grad_norm=0.0)
    before = weights(learner)
    # ratio e > 1 + clip_high with a positive advantage: the clip removes every gradient.
    batch = shifted(learner, tl.build_batch(make_trajectories(seed=6, n=2, advantages=[1.0, 2.0])), 1.0)
    stats = learner.learn(batch)
    assert stats["clip_high_fraction"] == 1.0 and stats["clip_fraction"] == 1.0
    assert stats["grad_norm"] == 0.0
    assert stats["min_ratio"] == pytest.approx(np.e, rel=1e-4)
    # ratio 1/e < 1 - clip_low with a negative advantage: likewise.
    batch = shifted(learner, tl.build_batch(make_trajectories(seed=6, n=2, advantages=[-1.0, -2.0])), -1.0)
    stats = learner.learn(batch)
    assert stats["clip_low_fraction"] == 1.0 and stats["grad_norm"] == 0.0
    assert_same_weights(before, weights(learner))
    # Inside the clip range the gradient flows.
    batch = shifted(learner, tl.build_batch(make_trajectories(seed=6, n=2, advantages=[1.0, 2.0])), 0.1)
    assert learner.learn(batch)["grad_norm"] > 0


def test_ratio_cap_truncates_negative_advantage_weights(tiny_model):
    trajectories = make_trajectories(seed=7, n=2, advantages=[-1.0, -1.0])
    grads = {}
    for shift in (np.log(3.0), 2.0, 3.0):
        learner = fresh(tiny_model, max_grad_norm=0.0, ratio_cap=3.0)
        stats = learner.learn(shifted(learner, tl.build_batch(trajectories), shift))
        grads[shift] = stats["grad_norm"]
        if shift > 1.5:
            assert stats["capped_fraction"] == 1.0
    # Beyond the cap every token's weight is the cap: the same gradient as at ratio = cap.
    assert grads[2.0] == pytest.approx(grads[np.log(3.0)], rel=1e-4)
    assert grads[3.0] == pytest.approx(grads[np.log(3.0)], rel=1e-4)
    learner = fresh(tiny_model, max_grad_norm=0.0, ratio_cap=0.0)
    uncapped = learner.learn(shifted(learner, tl.build_batch(trajectories), 2.0))["grad_norm"]
    assert uncapped == pytest.approx(grads[np.log(3.0)] * np.exp(2.0) / 3.0, rel=1e-4)


@pytest.mark.parametrize("normalization", ["dr_grpo", "token", "sequence"])
def test_length_normalisation(tiny_model, normalization):
    learner = fresh(tiny_model, normalization=normalization, max_completion_tokens=16)
    batch = on_policy(learner, tl.build_batch(make_trajectories(seed=8, n=3, advantages=[1.0, -2.0, 0.5])))
    batch["loss_mask"][0] = 0
    stats = learner.learn(batch)
    # On policy the ratio is 1, so the surrogate of a token is -A.
    co = batch["completion_offsets"]
    mask = batch["loss_mask"] == 1
    adv = np.repeat(batch["step_advantages"], np.diff(co))
    if normalization == "dr_grpo":
        want = -(adv[mask]).sum() / (len(batch["temperatures"]) * 16)
    elif normalization == "token":
        want = -(adv[mask]).mean()
    else:
        per_step = [-(adv[co[s]:co[s + 1]][mask[co[s]:co[s + 1]]]).mean() for s in range(len(co) - 1)]
        want = np.mean(per_step)
    assert stats["pg_loss"] == pytest.approx(want, rel=1e-5)
    assert stats["loss"] == pytest.approx(want, rel=1e-5)


def test_seeded_runs_are_reproducible(tiny_model):
    runs = []
    for _ in range(2):
        learner = fresh(tiny_model, seed=11, minibatches=2)
        batch = on_policy(learner, tl.build_batch(make_trajectories(seed=9, n=4)))
        stats = [learner.learn(batch) for _ in range(2)]
        runs.append((stats, weights(learner)))
    keys = ("loss", "pg_loss", "grad_norm", "entropy", "mean_ratio", "max_ratio")
    for a, b in zip(runs[0][0], runs[1][0]):
        assert {k: a[k] for k in keys} == {k: b[k] for k in keys}
    assert runs[0][0][0]["optimizer_steps"] == 2
    assert runs[0][0][1]["total_optimizer_steps"] == 4
    assert_same_weights(runs[0][1], runs[1][1])


def test_kl_to_the_initial_policy(tiny_model):
    learner = fresh(tiny_model, kl_coef=0.1)
    assert learner.reference is not None
    batch = on_policy(learner, tl.build_batch(make_trajectories(seed=10, n=2)))
    first = learner.learn(batch)
    assert first["kl"] == pytest.approx(0.0, abs=1e-6)
    second = learner.learn(batch)
    assert second["kl"] > 0
    assert second["loss"] != pytest.approx(second["pg_loss"])
    assert fresh(tiny_model).reference is None  # no reference without a KL term


def test_stats_fields(learner):
    batch = on_policy(learner, tl.build_batch(make_trajectories(seed=12, n=2)))
    stats = learner.learn(batch)
    for key in ("loss", "pg_loss", "kl", "entropy", "clip_fraction", "clip_low_fraction",
                "clip_high_fraction", "mean_ratio", "max_ratio", "grad_norm", "learner_tokens",
                "learner_tokens_per_s", "learn_s", "steps"):
        assert key in stats, key
        assert np.isfinite(stats[key]), key
    assert stats["steps"] == 4
    assert stats["processed_tokens"] > stats["learner_tokens"] > 0
    assert 0 < stats["entropy"] <= np.log(61) + 1e-4


def test_micro_batching_and_checkpointing_do_not_change_the_update(tiny_model):
    trajectories = make_trajectories(seed=13, n=3, steps=3)
    # An empty completion (a step that produced nothing) is allowed and simply carries no loss.
    trajectories[2]["steps"][2].update(completion=[], logprobs=[])
    results = []
    for overrides in ({"micro_batch_size": 1}, {"micro_batch_size": 16},
                      {"micro_batch_size": 2, "gradient_checkpointing": True}):
        # eps = 1 makes Adam's first step about lr * gradient instead of lr * sign(gradient), so
        # float rounding in near-zero gradients cannot flip whole steps.
        learner = fresh(tiny_model, eps=1.0, **overrides)
        batch = on_policy(learner, tl.build_batch(trajectories))
        stats = learner.learn(batch)
        results.append((stats, weights(learner)))
    for stats, final in results[1:]:
        assert stats["loss"] == pytest.approx(results[0][0]["loss"], rel=1e-5)
        assert stats["grad_norm"] == pytest.approx(results[0][0]["grad_norm"], rel=1e-4)
        for key in final:
            np.testing.assert_allclose(final[key], results[0][1][key], rtol=0, atol=1e-8, err_msg=key)
