"""A learning OnnxPolicy for frognano.GrpoTrainer (needs the compiled frognano package)."""

from __future__ import annotations

import dataclasses
import shutil
import time
from pathlib import Path

if __package__:  # frognano._learner_policy, inside the package
    from ._learner_batch import GREEDY_TEMPERATURE
    from ._learner_common import ConfigError, ModelError
    from ._learner_config import LearnerConfig
    from ._learner_model import TorchLearner
else:  # a top-level module beside torch_learner.py (see its imports)
    from _learner_batch import GREEDY_TEMPERATURE
    from _learner_common import ConfigError, ModelError
    from _learner_config import LearnerConfig
    from _learner_model import TorchLearner


class LearningOnnxPolicy:
    """An ``frognano.OnnxPolicy`` that learns with a ``TorchLearner``: a drop-in policy for
    ``frognano.GrpoTrainer`` (any object with act/learn/state/load_state is one).

    ``act`` rolls out in ONNX Runtime; ``learn(batch)`` turns the trainer's batch into token
    arrays (``frognano.token_batch``: the exact prompt ids, generated ids, rollout log-probs and
    loss masks), takes one update, exports the new weights as an fp32 ONNX folder under
    ``work_dir`` and reloads the policy on it (the hand-back; ``handback_s`` in the stats).
    ``state``/``load_state`` write and restore learner checkpoints (weights, optimizer, RNG).

    ``model``: an fp32 model folder with ``model.safetensors`` (what ``frognano.fetch_model``
    writes, e.g. ``frognano.fetch_model("smollm2-135m:fp32")``, or the converter's ``from-hf``
    output). ``learner``: ``LearnerConfig`` settings. Other keyword arguments go to
    ``frognano.OnnxPolicy`` (generation, system_prompt, max_prompt_tokens, ...). Rollouts sample
    at temperature 1 unless ``generation`` says otherwise; greedy rollouts are refused (every
    rollout of a group would be the same, and nothing would be learned).
    """

    def __init__(self, model, learner: dict | LearnerConfig | None = None, *, work_dir=None,
                 **policy_options):
        import tempfile

        import frognano

        self.start = Path(model)
        if not (self.start / "model.safetensors").is_file():
            raise ModelError(f"{self.start} holds no model.safetensors (train an fp32 model folder)")
        config = learner if isinstance(learner, LearnerConfig) else LearnerConfig.from_dict(learner)
        if config.converter is None:
            config = dataclasses.replace(config, converter=frognano._frognano._converter_script())
        self._frognano = frognano
        generation = {"temperature": 1.0, **dict(policy_options.pop("generation", None) or {})}
        temperature = generation.get("temperature")
        if isinstance(temperature, (int, float)) and temperature <= GREEDY_TEMPERATURE:
            raise ConfigError("greedy training rollouts (temperature 0) make every rollout of a "
                              "group the same: every group has equal rewards and nothing is "
                              "learned; sample them (temperature 1 is the default)")
        self.policy = frognano.OnnxPolicy(str(self.start), generation=generation, **policy_options)
        self.learner = TorchLearner(self.start, config)
        self.work_dir = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="frognano-llm-"))
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.updates = 0
        self.weights = self.start

    def act(self, contexts):
        return self.policy.act(contexts)

    def _hand_back(self) -> float:
        started = time.perf_counter()
        out = self.work_dir / "weights" / f"update-{self.updates:05d}"
        if out.exists():
            shutil.rmtree(out)
        self.learner.export_onnx(out, precisions=("fp32",))
        folder = out / "fp32" if (out / "fp32").is_dir() else out
        self.policy.reload(str(folder))
        previous, self.weights = self.weights, folder
        if previous != self.start and previous.parent.parent == self.work_dir / "weights":
            shutil.rmtree(previous.parent, ignore_errors=True)
        return time.perf_counter() - started

    def learn(self, batch) -> dict:
        arrays = self._frognano.token_batch(batch)
        stats = self.learner.learn(arrays)
        if stats.get("updated"):
            self.updates += 1
            stats["handback_s"] = self._hand_back()
        stats["updates"] = self.updates
        return stats

    def state(self) -> dict:
        path = self.work_dir / "checkpoints" / f"learner-{self.updates:05d}.pt"
        self.learner.save_checkpoint(path)
        return {"kind": "language-model", "updates": self.updates, "learner_checkpoint": str(path)}

    def load_state(self, state: dict) -> None:
        if not isinstance(state, dict) or state.get("kind") != "language-model":
            raise ConfigError("not a language-model policy state")
        self.learner.load_checkpoint(state["learner_checkpoint"])
        self.updates = int(state["updates"])
        if self.updates:
            self._hand_back()
