"""TorchLearner: loading the policy (and, for a KL term, the frozen reference), LoRA, the
optimizer; its objective and weights come from _learner_objective and _learner_weights."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

if __package__:  # frognano._learner_model, inside the package
    from ._learner_common import ConfigError, ModelError, _one_line, _torch, log
    from ._learner_config import LearnerConfig
    from ._learner_objective import _ObjectiveMixin
    from ._learner_weights import _WeightsMixin
else:  # a top-level module beside torch_learner.py (see its imports)
    from _learner_common import ConfigError, ModelError, _one_line, _torch, log
    from _learner_config import LearnerConfig
    from _learner_objective import _ObjectiveMixin
    from _learner_weights import _WeightsMixin


def seed_everything(seed: int) -> None:
    torch = _torch()
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


class TorchLearner(_ObjectiveMixin, _WeightsMixin):
    """Policy-gradient learner over a Hugging Face causal LM checkpoint (see torch_learner.py's docs)."""

    def __init__(self, model_dir, config: LearnerConfig | dict | None = None):
        torch = _torch()
        self.config = config if isinstance(config, LearnerConfig) else LearnerConfig.from_dict(config)
        self.config.validate()
        cfg = self.config
        self.model_dir = Path(model_dir)
        if not (self.model_dir / "config.json").is_file():
            raise ModelError(f"{self.model_dir} is not a Hugging Face model folder (no config.json)")
        if cfg.num_threads:
            torch.set_num_threads(cfg.num_threads)
        if cfg.device == "auto":
            self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        else:
            if cfg.device.startswith("cuda") and not torch.cuda.is_available():
                raise ConfigError(f"device {cfg.device!r} requested but CUDA is not available")
            self.device = torch.device(cfg.device)
        if cfg.dtype == "bfloat16" and self.device.type != "cuda":
            raise ConfigError("dtype bfloat16 needs a CUDA device (use float32 on CPU)")
        self.autocast_dtype = torch.bfloat16 if cfg.dtype == "bfloat16" else None
        seed_everything(cfg.seed)

        self.model = self._load_model()
        self.vocab_size = int(self.model.get_output_embeddings().weight.shape[0])
        self.is_lora = cfg.lora_rank > 0
        if self.is_lora:
            self.model = self._wrap_lora(self.model)
        self.model.to(self.device)
        if cfg.gradient_checkpointing:
            options = {"use_reentrant": False}
            if hasattr(self.model, "activation_checkpointing_enable"):  # transformers >= 5
                self.model.activation_checkpointing_enable(activation_checkpointing_kwargs=options)
            else:
                self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=options)
            if self.is_lora:
                self.model.enable_input_require_grads()
        self.model.train()  # dropout itself is disabled in _load_model (LoRA dropout excepted)

        self.reference = None
        if cfg.kl_coef > 0 and not self.is_lora:
            self.reference = self._load_model().to(self.device).eval()
            for parameter in self.reference.parameters():
                parameter.requires_grad_(False)

        self.trainable = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            self.trainable, lr=cfg.resolved_learning_rate(), betas=tuple(cfg.betas), eps=cfg.eps,
            weight_decay=cfg.weight_decay)
        self.optimizer_steps = 0
        self.updates = 0  # learn() calls that changed the weights
        self.checked_rollouts = False  # the first batch's log-probs are checked once
        self.last_export = None
        log.info("learner ready: %s on %s, %d parameters (%d trainable)", self.model_dir,
                 self.device, self.parameter_count(), self.trainable_count())

    # -- setup -----------------------------------------------------------------------------------

    def _load_model(self):
        torch = _torch()
        from transformers import AutoModelForCausalLM

        try:
            model = AutoModelForCausalLM.from_pretrained(str(self.model_dir), dtype=torch.float32)
        except Exception as error:
            raise ModelError(f"cannot load the model in {self.model_dir}: {_one_line(error)}") from error
        model.config.use_cache = False
        _disable_dropout(model)
        return model

    def _wrap_lora(self, model):
        try:
            from peft import LoraConfig, get_peft_model
        except ImportError as error:
            raise ConfigError("lora_rank > 0 needs the peft package") from error
        cfg = self.config
        present = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
        targets = [m for m in cfg.target_modules if m in present]
        if not targets:
            raise ConfigError(f"none of target_modules {list(cfg.target_modules)} exist in the model")
        lora = LoraConfig(r=cfg.lora_rank, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                          target_modules=targets, bias="none", task_type="CAUSAL_LM")
        return get_peft_model(model, lora)

    def _base_model(self):
        return self.model.get_base_model() if self.is_lora else self.model

    def parameter_count(self) -> int:
        return int(sum(p.numel() for p in self.model.parameters()))

    def trainable_count(self) -> int:
        return int(sum(p.numel() for p in self.trainable))


def _disable_dropout(model) -> None:
    """Turns dropout off in the policy so the learner scores tokens as the rollout engine did."""
    torch = _torch()
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        for attribute in ("attention_dropout", "dropout", "hidden_dropout"):
            if isinstance(getattr(module, attribute, None), float):
                setattr(module, attribute, 0.0)
