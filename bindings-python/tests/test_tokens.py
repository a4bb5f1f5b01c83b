"""Token-exact batches for language-model learners: OnnxPolicy's outputs carry the prompt ids
each reply was generated from, and a TrainingBatch dict becomes flat numpy arrays (token_batch)
and a safetensors file (save_token_batch / load_token_batch)."""

import numpy as np
import pytest

import frognano


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-tokens")
    fp32 = frognano.make_tiny_model(root, seed=0, progress=lambda message: None)
    return frognano.OnnxPolicy(fp32, generation={"max_new_tokens": 6, "temperature": 0.8})


def context(text):
    return {"task_id": "t", "initial": {"text": text}, "history": []}


def batch_of(outputs, advantages):
    return {
        "iteration": 3,
        "estimator": "grpo",
        "group_size": len(outputs),
        "trajectories": [
            {"task_id": "t", "group": 0, "reward": float(a > 0), "advantage": a,
             "resolved": a > 0, "truncated": False,
             "steps": [{"action": o["action"], "observation": "", **{k: o[k] for k in
                        ("logprobs", "prompt_ids", "token_ids", "loss_mask", "decision")}}]}
            for o, a in zip(outputs, advantages)
        ],
    }


def test_policy_outputs_carry_the_exact_prompt_ids(policy):
    contexts = [context("fix add()"), context("a longer statement about a failing parser test")]
    outputs = policy.act(contexts)
    for c, o in zip(contexts, outputs):
        assert o["prompt_ids"] == policy.prompt_ids(c)
        assert len(o["loss_mask"]) == len(o["token_ids"]) == len(o["logprobs"])
        assert all(o["loss_mask"])


def test_batches_become_arrays_and_files(policy, tmp_path):
    outputs = policy.act([context("fix add()"), context("fix sub()")])
    batch = batch_of(outputs, [1.0, -1.0])
    arrays = frognano.token_batch(batch)
    assert arrays["metadata"]["format"] == "frognano-token-batch"
    assert arrays["prompt_offsets"].dtype == np.int64
    starts = arrays["prompt_offsets"]
    assert list(arrays["prompt_ids"][starts[0]:starts[1]]) == outputs[0]["prompt_ids"]
    ends = arrays["completion_offsets"]
    assert list(arrays["completion_ids"][ends[1]:ends[2]]) == outputs[1]["token_ids"]
    np.testing.assert_allclose(arrays["rollout_logprobs"][:ends[1]], outputs[0]["logprobs"], rtol=0, atol=0)
    assert list(arrays["step_advantages"]) == [1.0, -1.0]
    assert arrays["temperatures"].tolist() == pytest.approx([0.8, 0.8])
    path = tmp_path / "batch.safetensors"
    frognano.save_token_batch(batch, path)
    back = frognano.load_token_batch(path)
    for name, value in arrays.items():
        if name == "metadata":
            assert back[name] == value
        else:
            np.testing.assert_array_equal(back[name], value)


def test_batches_a_token_learner_cannot_use_are_refused(policy, tmp_path):
    outputs = policy.act([context("fix add()"), context("fix sub()")])
    no_prompt = batch_of(outputs, [1.0, -1.0])
    del no_prompt["trajectories"][0]["steps"][0]["prompt_ids"]
    with pytest.raises(frognano.InvalidArgumentError, match="prompt ids"):
        frognano.token_batch(no_prompt)
    short = batch_of(outputs, [1.0, -1.0])
    short["trajectories"][1]["steps"][0]["logprobs"].pop()
    with pytest.raises(frognano.InvalidArgumentError, match="log-probs for"):
        frognano.save_token_batch(short, tmp_path / "short.safetensors")
    assert not (tmp_path / "short.safetensors").exists()
    not_finite = batch_of(outputs, [float("nan"), 1.0])
    with pytest.raises(frognano.InvalidArgumentError, match="NaN"):
        frognano.token_batch(not_finite)
    (tmp_path / "junk.safetensors").write_bytes(b"junk")
    with pytest.raises(frognano.InvalidArgumentError):
        frognano.load_token_batch(tmp_path / "junk.safetensors")
