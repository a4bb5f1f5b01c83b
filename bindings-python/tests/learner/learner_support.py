"""Shared helpers for the PyTorch learner tests (imported by conftest and the tests)."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import torch

torch.set_num_threads(2)

MODULE_PATH = Path(__file__).resolve().parents[2] / "python" / "frognano" / "torch_learner.py"
VOCAB = 61


def _load_module():
    spec = importlib.util.spec_from_file_location("frognano_torch_learner", MODULE_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


tl = _load_module()


def make_trajectories(seed=0, n=4, steps=2, prompt=(3, 7), completion=(3, 6), advantages=None,
                      temperature=1.0):
    rng = np.random.default_rng(seed)
    trajectories = []
    for t in range(n):
        advantage = float(advantages[t]) if advantages is not None else float(rng.normal())
        traj_steps = []
        for _ in range(steps):
            p = int(rng.integers(*prompt))
            c = int(rng.integers(*completion))
            traj_steps.append({"prompt": rng.integers(3, VOCAB, p).tolist(),
                               "completion": rng.integers(3, VOCAB, c).tolist(),
                               "logprobs": [-1.0] * c, "temperature": temperature})
        trajectories.append({"steps": traj_steps, "advantage": advantage, "reward": advantage,
                             "group": t // 2, "task_id": f"t{t}"})
    return trajectories


def on_policy(learner, batch):
    """The batch with rollout_logprobs replaced by the learner's own (ratio 1)."""
    batch = dict(batch)
    batch["rollout_logprobs"] = learner.logprobs(batch).astype(np.float32)
    return batch


def weights(learner):
    return {k: v.copy() for k, v in learner.state_tensors().items()}


def assert_same_weights(a, b):
    assert a.keys() == b.keys()
    for key in a:
        assert np.array_equal(a[key], b[key]), key


def step_logits(model, batch):
    """Per step: (prompt length, completion ids, the plain forward pass's float logits of the
    prompt and completion), the reference the learner's log-probs are checked against."""
    po, co = batch["prompt_offsets"], batch["completion_offsets"]
    with torch.no_grad():
        for s in range(len(batch["temperatures"])):
            prompt = batch["prompt_ids"][po[s]:po[s + 1]]
            completion = batch["completion_ids"][co[s]:co[s + 1]]
            ids = torch.from_numpy(np.concatenate([prompt, completion]))[None]
            yield s, len(prompt), completion, model(input_ids=ids).logits[0].float()
