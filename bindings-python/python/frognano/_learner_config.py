"""The learner's configuration: LearnerConfig, its defaults and its validation."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

if __package__:  # frognano._learner_config, inside the package
    from ._learner_common import ConfigError
else:  # a top-level module beside torch_learner.py (see its imports)
    from _learner_common import ConfigError


NORMALIZATIONS = ("dr_grpo", "token", "sequence")
DEFAULT_TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass
class LearnerConfig:
    """Learner hyper-parameters (see torch_learner.py's docs for the objective).

    ``learning_rate`` None resolves to 1e-6 for full fine-tuning (the usual GRPO/DAPO rate; Adam
    makes the step size per weight about the learning rate whatever the loss scale) and 1e-5 with
    LoRA (LoRA's best rate is about 10x full fine-tuning's).
    """

    learning_rate: float | None = None
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    warmup_steps: int = 0  # linear learning-rate warm-up over this many optimizer steps
    clip_low: float = 0.2
    clip_high: float = 0.28
    ratio_cap: float = 3.0  # truncated IS for negative advantages; 0 disables
    normalization: str = "dr_grpo"
    max_completion_tokens: int = 384  # Dr. GRPO's constant normaliser
    kl_coef: float = 0.0
    mask_length_limited: bool = True  # no loss on replies cut at the token limit
    mask_truncated: bool = False  # no loss on whole trajectories that ran out of steps
    max_initial_log_ratio: float = 0.5  # first-batch check of the rollout log-probs; 0 disables
    micro_batch_size: int = 4  # steps per forward pass
    minibatches: int = 1  # optimizer steps per batch
    max_grad_norm: float = 1.0  # 0 disables clipping (the norm is still reported)
    lora_rank: int = 0
    lora_alpha: float = 16.0
    lora_dropout: float = 0.0
    target_modules: tuple[str, ...] = DEFAULT_TARGET_MODULES
    gradient_checkpointing: bool = False
    seed: int = 0
    device: str = "auto"
    dtype: str = "float32"
    num_threads: int = 0  # torch CPU threads; 0 keeps torch's default
    converter: str | None = None  # path of frognano_models.py (or its folder) for export_onnx

    @classmethod
    def from_dict(cls, values: dict | None) -> "LearnerConfig":
        values = dict(values or {})
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ConfigError(f"unknown learner config key(s): {', '.join(unknown)} "
                              f"(known: {', '.join(sorted(names))})")
        if "betas" in values:
            values["betas"] = tuple(values["betas"])
        if "target_modules" in values:
            values["target_modules"] = tuple(values["target_modules"])
        config = cls(**values)
        config.validate()
        return config

    def validate(self) -> None:
        def check(condition: bool, message: str) -> None:
            if not condition:
                raise ConfigError(message)

        def number(name: str) -> float:
            value = getattr(self, name)
            check(isinstance(value, (int, float)) and not isinstance(value, bool)
                  and math.isfinite(value), f"{name} must be a finite number, got {value!r}")
            return float(value)

        if self.learning_rate is not None:
            check(number("learning_rate") > 0, "learning_rate must be > 0")
        check(number("weight_decay") >= 0, "weight_decay must be >= 0")
        check(len(self.betas) == 2 and all(0 <= float(b) < 1 for b in self.betas),
              f"betas must be two numbers in [0, 1), got {self.betas!r}")
        check(number("eps") > 0, "eps must be > 0")
        check(0 <= number("clip_low") < 1, "clip_low must be in [0, 1)")
        check(number("clip_high") >= 0, "clip_high must be >= 0")
        cap = number("ratio_cap")
        check(cap == 0 or cap >= 1 + self.clip_high,
              f"ratio_cap must be 0 (off) or >= 1 + clip_high, got {cap}")
        check(self.normalization in NORMALIZATIONS,
              f"normalization must be one of {', '.join(NORMALIZATIONS)}, got {self.normalization!r}")
        for name in ("max_completion_tokens", "micro_batch_size", "minibatches"):
            value = getattr(self, name)
            check(isinstance(value, int) and not isinstance(value, bool) and value >= 1,
                  f"{name} must be an integer >= 1, got {value!r}")
        for name in ("warmup_steps", "lora_rank", "seed", "num_threads"):
            value = getattr(self, name)
            check(isinstance(value, int) and not isinstance(value, bool) and value >= 0,
                  f"{name} must be an integer >= 0, got {value!r}")
        check(number("kl_coef") >= 0, "kl_coef must be >= 0")
        check(number("max_initial_log_ratio") >= 0, "max_initial_log_ratio must be >= 0")
        for name in ("mask_length_limited", "mask_truncated"):
            check(isinstance(getattr(self, name), bool), f"{name} must be true or false")
        check(number("max_grad_norm") >= 0, "max_grad_norm must be >= 0")
        check(number("lora_alpha") > 0, "lora_alpha must be > 0")
        check(0 <= number("lora_dropout") < 1, "lora_dropout must be in [0, 1)")
        check(len(self.target_modules) > 0 and all(isinstance(m, str) for m in self.target_modules),
              "target_modules must be a non-empty list of module names")
        check(self.device in ("auto", "cpu", "cuda") or str(self.device).startswith("cuda:"),
              f"device must be auto, cpu, cuda or cuda:N, got {self.device!r}")
        check(self.dtype in ("float32", "bfloat16"), f"dtype must be float32 or bfloat16, got {self.dtype!r}")

    def resolved_learning_rate(self) -> float:
        if self.learning_rate is not None:
            return float(self.learning_rate)
        return 1e-5 if self.lora_rank > 0 else 1e-6

    def to_dict(self) -> dict:
        values = dataclasses.asdict(self)
        values["betas"] = list(self.betas)
        values["target_modules"] = list(self.target_modules)
        return values
