"""The objective: scoring a token batch's completion tokens under the policy (tempered, top-k /
top-p truncated as the rollout sampled them) and one policy-gradient update (learn); part of
TorchLearner (torch_learner.py documents the objective)."""

from __future__ import annotations

import math
import os
import time

import numpy as np

if __package__:  # frognano._learner_objective, inside the package
    from ._learner_batch import GREEDY_TEMPERATURE, load_batch, trained_token_mask, validate_batch
    from ._learner_common import BatchError, _torch, log
else:  # a top-level module beside torch_learner.py (see its imports)
    from _learner_batch import GREEDY_TEMPERATURE, load_batch, trained_token_mask, validate_batch
    from _learner_common import BatchError, _torch, log


# Log-ratios are clamped before exp() so that a wildly off-policy token cannot overflow.
MAX_LOG_RATIO = 20.0


def _truncate_logits(logits, targets, top_k: np.ndarray, top_p: np.ndarray):
    """The tempered logits with every token outside each row's top-k / top-p set at -inf, as the
    rollout sampler drew them (top-k first, then the smallest set of most likely tokens whose
    probability reaches top-p); each row's target token is always kept, so that a token the
    rollout drew stays scorable after the weights moved. Rows without truncation pass as they
    are; the kept set is chosen without gradient, the kept logits keep theirs."""
    torch = _torch()
    vocab = logits.shape[-1]
    rows = np.nonzero(((top_k > 0) & (top_k < vocab)) | (top_p < 1.0))[0]
    if len(rows) == 0:
        return logits
    with torch.no_grad():
        index = torch.from_numpy(rows).to(logits.device)
        sub = logits[index]
        ordered, order = torch.sort(sub, dim=-1, descending=True)
        rank = torch.arange(vocab, device=logits.device)[None, :]
        k = torch.from_numpy(np.where(top_k[rows] > 0, top_k[rows], vocab)).to(logits.device)
        keep_sorted = rank < k[:, None]
        probs = torch.softmax(ordered.masked_fill(~keep_sorted, float("-inf")), dim=-1)
        before = torch.cumsum(probs, dim=-1) - probs  # mass of the more likely kept tokens
        p = torch.from_numpy(top_p[rows].astype(np.float32)).to(logits.device)
        keep_sorted &= (before < p[:, None]) | (p[:, None] >= 1.0)
        keep_sorted[:, 0] = True
        keep = torch.zeros_like(keep_sorted).scatter(1, order, keep_sorted)
        keep[torch.arange(len(rows), device=logits.device), targets[index]] = True
        mask = torch.ones(logits.shape, dtype=torch.bool, device=logits.device)
        mask[index] = keep
    return logits.masked_fill(~mask, float("-inf"))


class _ObjectiveMixin:
    """TorchLearner's forward passes and its update (see torch_learner.py's docstring for the
    objective): log-probs of a batch under the policy, and learn()."""

    # -- forward ---------------------------------------------------------------------------------

    def _autocast(self):
        torch = _torch()
        if self.autocast_dtype is None:
            import contextlib

            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype)

    def _micro_batches(self, batch: dict, steps: list[int]) -> list[list[int]]:
        """Steps grouped into forward passes, longest first, similar lengths together."""
        lengths = np.diff(batch["prompt_offsets"]) + np.diff(batch["completion_offsets"])
        order = sorted(steps, key=lambda s: (-int(lengths[s]), s))
        size = self.config.micro_batch_size
        return [order[i:i + size] for i in range(0, len(order), size)]

    def _forward_logprobs(self, model, batch: dict, steps: list[int], token_sel: np.ndarray | None,
                          want_entropy: bool):
        """Runs one micro batch; returns (flat token indices, logprobs, entropy or None, processed).

        ``token_sel`` (bool [C]) chooses which completion tokens get logits (None: all)."""
        torch = _torch()
        po, co = batch["prompt_offsets"], batch["completion_offsets"]
        rows, positions, targets, token_index, temps, top_ks, top_ps = [], [], [], [], [], [], []
        inputs = []
        for row, s in enumerate(steps):
            prompt = batch["prompt_ids"][po[s]:po[s + 1]]
            completion = batch["completion_ids"][co[s]:co[s + 1]]
            ids = np.concatenate([prompt, completion[:-1]])
            inputs.append(ids)
            tokens = np.arange(co[s], co[s + 1])
            local = np.arange(len(completion))
            if token_sel is not None:
                keep = token_sel[co[s]:co[s + 1]]
                tokens, local = tokens[keep], local[keep]
            rows.append(np.full(len(local), row))
            positions.append(len(prompt) - 1 + local)
            targets.append(completion[local])
            token_index.append(tokens)
            temperature = float(batch["temperatures"][s])
            greedy = temperature <= GREEDY_TEMPERATURE
            temps.append(np.full(len(local), 1.0 if greedy else temperature))
            # Greedy steps report the model's own distribution: no truncation.
            top_ks.append(np.full(len(local), 0 if greedy else int(batch["top_k"][s])))
            top_ps.append(np.full(len(local), 1.0 if greedy else float(batch["top_p"][s])))
        width = max(len(ids) for ids in inputs)
        # Right padding: under causal attention no real position ever sees a pad, so no
        # attention mask is needed and the default positions 0..n-1 are each row's own.
        padded = np.zeros((len(inputs), width), np.int64)
        for row, ids in enumerate(inputs):
            padded[row, :len(ids)] = ids
        processed = int(sum(len(ids) for ids in inputs))
        rows_t = torch.from_numpy(np.concatenate(rows)).to(self.device)
        pos_t = torch.from_numpy(np.concatenate(positions)).to(self.device)
        targets_t = torch.from_numpy(np.concatenate(targets)).to(self.device)
        temps_t = torch.from_numpy(np.concatenate(temps).astype(np.float32)).to(self.device)
        with self._autocast():
            decoder = model.get_decoder()
            hidden = decoder(input_ids=torch.from_numpy(padded).to(self.device), use_cache=False)
            hidden = hidden.last_hidden_state if hasattr(hidden, "last_hidden_state") else hidden[0]
        # Only the scored positions go through the LM head, in float32 even under bf16 autocast:
        # log-ratios of a few hundredths matter, and bf16 logits are coarser than that.
        selected = hidden[rows_t, pos_t].float()
        if self.autocast_dtype is not None:
            with torch.autocast(device_type=self.device.type, enabled=False):
                logits = model.get_output_embeddings()(selected)
        else:
            logits = model.get_output_embeddings()(selected)
        logits = logits.float() / temps_t[:, None]
        logits = _truncate_logits(logits, targets_t, np.concatenate(top_ks), np.concatenate(top_ps))
        logp_all = torch.log_softmax(logits, dim=-1)
        logp = logp_all.gather(1, targets_t[:, None]).squeeze(1)
        entropy = None
        if want_entropy:
            with torch.no_grad():
                probs = logp_all.exp()
                entropy = -(probs * torch.where(probs > 0, logp_all, 0.0)).sum(-1)
        return np.concatenate(token_index), logp, entropy, processed

    # -- public API ------------------------------------------------------------------------------

    def _prepare(self, batch) -> dict:
        if isinstance(batch, (str, os.PathLike)):
            return load_batch(batch, vocab_size=self.vocab_size)
        return validate_batch(batch, vocab_size=self.vocab_size)

    def logprobs(self, batch) -> np.ndarray:
        """log_softmax(logits / T)[token] of every completion token under the current policy."""
        torch = _torch()
        batch = self._prepare(batch)
        out = np.zeros(len(batch["completion_ids"]), np.float32)
        steps = [s for s in range(len(batch["temperatures"]))
                 if batch["completion_offsets"][s + 1] > batch["completion_offsets"][s]]
        if not steps:
            return out
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                for micro in self._micro_batches(batch, steps):
                    index, logp, _, _ = self._forward_logprobs(self.model, batch, micro, None, False)
                    out[index] = logp.float().cpu().numpy()
        finally:
            self.model.train(was_training)
        return out

    def _reference_logprobs(self, batch, micro, sel):
        torch = _torch()
        with torch.no_grad():
            if self.is_lora:
                with self.model.disable_adapter():
                    return self._forward_logprobs(self.model, batch, micro, sel, False)[1]
            return self._forward_logprobs(self.reference, batch, micro, sel, False)[1]

    def _minibatches(self, batch: dict) -> list[list[int]]:
        """Splits all steps into ``minibatches`` groups of whole trajectories (fewer if there are
        fewer trajectories), keeping trajectory order."""
        steps = list(range(len(batch["temperatures"])))
        k = self.config.minibatches
        if k <= 1 or not steps:
            return [steps]
        owner = batch["step_trajectory"]
        trajectories = np.unique(owner)
        chunks = np.array_split(trajectories, min(k, len(trajectories)))
        chunk_of = {int(t): i for i, chunk in enumerate(chunks) for t in chunk}
        groups: list[list[int]] = [[] for _ in chunks]
        for s in steps:
            groups[chunk_of[int(owner[s])]].append(s)
        return groups

    def learn(self, batch) -> dict:
        """One update on a token batch (path or dict); returns statistics (see ``STATS_DOC``)."""
        torch = _torch()
        cfg = self.config
        started = time.perf_counter()
        batch = self._prepare(batch)
        trained = trained_token_mask(batch, cfg.mask_truncated, cfg.mask_length_limited)
        num_steps = len(batch["temperatures"])
        wanted = int(batch["loss_mask"].sum())
        masked_fraction = 1.0 - int(trained.sum()) / wanted if wanted else 0.0
        if masked_fraction > 0.5:
            log.warning("%.0f%% of this batch's model tokens carry no loss (replies cut at the "
                        "token limit%s): raise max_new_tokens, or set mask_length_limited false",
                        100 * masked_fraction,
                        ", trajectories out of steps" if cfg.mask_truncated else "")
        co = batch["completion_offsets"]
        cumulative = np.concatenate([[0], np.cumsum(trained, dtype=np.int64)])
        step_tokens = cumulative[co[1:]] - cumulative[co[:-1]]  # trained tokens per step
        active = [s for s in range(num_steps) if step_tokens[s] > 0]
        base = {"steps": num_steps, "trajectories": int(len(batch["advantages"])),
                "iteration": batch["metadata"].get("iteration"), "masked_fraction": masked_fraction}
        if not active:
            return {**base, **_empty_stats(), "learn_s": time.perf_counter() - started,
                    "skipped": "no trained tokens", "updated": False}

        advantages = batch["step_advantages"].astype(np.float32)
        token_adv = np.repeat(advantages, np.diff(co))
        if not self.checked_rollouts and cfg.max_initial_log_ratio > 0:
            self._check_rollout_logprobs(batch, trained, active)
        if cfg.kl_coef == 0 and not token_adv[trained].any():
            # No gradient at all, but AdamW's momentum (and weight decay) would still move the
            # weights: no step, nothing to hand back.
            return {**base, **_empty_stats(), "learn_s": time.perf_counter() - started,
                    "skipped": "every advantage is 0", "updated": False}
        rollout = batch["rollout_logprobs"].astype(np.float32)
        sums = {"loss": 0.0, "pg_loss": 0.0}
        token_stats = {"kl": [], "entropy": [], "ratio": [], "clip_low": [], "clip_high": [],
                       "capped": [], "adv": []}
        grad_norms, processed, skipped_steps = [], 0, 0
        lr = cfg.resolved_learning_rate()
        self.model.train()
        # (all steps of the minibatch, the steps with trained tokens); Dr. GRPO's normaliser
        # counts all steps, the other two only what carries loss.
        minibatches = [(m, [s for s in m if step_tokens[s] > 0]) for m in self._minibatches(batch)]
        minibatches = [(m, a) for m, a in minibatches if a]
        for mb_steps_all, minibatch in minibatches:
            mb_tokens = int(sum(step_tokens[s] for s in minibatch))
            self.optimizer.zero_grad(set_to_none=True)
            for micro in self._micro_batches(batch, minibatch):
                index, logp, entropy, n = self._forward_logprobs(self.model, batch, micro, trained, True)
                processed += n
                old = torch.from_numpy(rollout[index]).to(self.device)
                adv = torch.from_numpy(token_adv[index]).to(self.device)
                # Per-token normalisation weights.
                if cfg.normalization == "dr_grpo":
                    weight = torch.full_like(logp, 1.0 / (len(mb_steps_all) * cfg.max_completion_tokens))
                elif cfg.normalization == "token":
                    weight = torch.full_like(logp, 1.0 / mb_tokens)
                else:
                    owner = np.searchsorted(co, index, side="right") - 1
                    per = 1.0 / (step_tokens[owner].astype(np.float64) * len(minibatch))
                    weight = torch.from_numpy(per.astype(np.float32)).to(self.device)
                log_ratio = torch.clamp(logp - old, -MAX_LOG_RATIO, MAX_LOG_RATIO)
                ratio = torch.exp(log_ratio)
                unclipped = ratio
                if cfg.ratio_cap > 0:
                    capped = cfg.ratio_cap * torch.exp(logp - logp.detach())
                    unclipped = torch.where(ratio > cfg.ratio_cap, capped, ratio)
                clipped = torch.clamp(ratio, 1.0 - cfg.clip_low, 1.0 + cfg.clip_high)
                pg = -torch.minimum(unclipped * adv, clipped * adv)
                token_loss = pg
                if cfg.kl_coef > 0:
                    ref = self._reference_logprobs(batch, micro, trained)
                    delta = ref - logp
                    kl = torch.exp(delta) - delta - 1.0
                    token_loss = pg + cfg.kl_coef * kl
                    token_stats["kl"].append(kl.detach().float().cpu().numpy())
                loss = (token_loss * weight).sum()
                loss.backward()
                sums["loss"] += float(loss.detach()) / len(minibatches)
                sums["pg_loss"] += float((pg.detach() * weight).sum()) / len(minibatches)
                r = ratio.detach().float().cpu().numpy()
                a = adv.cpu().numpy()
                token_stats["ratio"].append(r)
                token_stats["adv"].append(a)
                token_stats["entropy"].append(entropy.float().cpu().numpy())
                token_stats["clip_high"].append((a > 0) & (r > 1.0 + cfg.clip_high))
                token_stats["clip_low"].append((a < 0) & (r < 1.0 - cfg.clip_low))
                token_stats["capped"].append((a < 0) & (r > cfg.ratio_cap) if cfg.ratio_cap > 0
                                             else np.zeros_like(r, bool))
            max_norm = cfg.max_grad_norm if cfg.max_grad_norm > 0 else float("inf")
            norm = float(torch.nn.utils.clip_grad_norm_(self.trainable, max_norm))
            grad_norms.append(norm)
            if not math.isfinite(norm):
                log.warning("non-finite gradient norm; optimizer step skipped")
                self.optimizer.zero_grad(set_to_none=True)
                skipped_steps += 1
                continue
            lr = self._scheduled_lr()
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            self.optimizer_steps += 1
        updated = skipped_steps < len(minibatches)
        if updated:
            self.updates += 1
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        elapsed = time.perf_counter() - started
        cat = {k: np.concatenate(v) if v else np.zeros(0) for k, v in token_stats.items()}
        n_tokens = int(trained.sum())
        clip_low = float(cat["clip_low"].mean())
        clip_high = float(cat["clip_high"].mean())
        stats = {
            **base,
            "loss": sums["loss"],
            "pg_loss": sums["pg_loss"],
            "kl": float(cat["kl"].mean()) if cat["kl"].size else 0.0,
            "entropy": float(cat["entropy"].mean()),
            "clip_fraction": clip_low + clip_high,
            "clip_low_fraction": clip_low,
            "clip_high_fraction": clip_high,
            "capped_fraction": float(cat["capped"].mean()),
            "mean_ratio": float(cat["ratio"].mean()),
            "max_ratio": float(cat["ratio"].max()),
            "min_ratio": float(cat["ratio"].min()),
            "grad_norm": float(np.mean(grad_norms)) if grad_norms else 0.0,
            "learner_tokens": n_tokens,
            "processed_tokens": processed,
            "learner_tokens_per_s": processed / elapsed if elapsed > 0 else 0.0,
            "trained_tokens_per_s": n_tokens / elapsed if elapsed > 0 else 0.0,
            "learn_s": elapsed,
            "optimizer_steps": len(minibatches) - skipped_steps,
            "total_optimizer_steps": self.optimizer_steps,
            "learning_rate": lr,
            "mean_advantage": float(cat["adv"].mean()),
            "updated": updated,
        }
        if skipped_steps:
            stats["skipped"] = f"{skipped_steps} optimizer step(s) skipped: non-finite gradient"
        return stats

    def _check_rollout_logprobs(self, batch: dict, trained: np.ndarray, active: list[int]) -> None:
        """Before the first update: the rollout log-probs must be this policy's (see the module
        docs). Scores up to two micro batches without gradient; raises ``BatchError`` when the
        mean |log-ratio| exceeds ``max_initial_log_ratio``."""
        torch = _torch()
        limit = self.config.max_initial_log_ratio
        rollout = batch["rollout_logprobs"]
        # The same tokens scored as the model's own distribution (temperature 1, no truncation),
        # to recognise rollout log-probs reported at temperature 1.
        plain = {**batch, "temperatures": np.ones_like(batch["temperatures"]),
                 "top_k": np.zeros_like(batch["top_k"]), "top_p": np.ones_like(batch["top_p"])}
        tempered = bool((np.abs(batch["temperatures"][active] - 1.0) > 1e-4).any())
        diffs, plain_diffs = [], []
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                for micro in self._micro_batches(batch, active)[:2]:
                    index, logp, _, _ = self._forward_logprobs(self.model, batch, micro, trained, False)
                    diffs.append(np.abs(logp.float().cpu().numpy() - rollout[index]))
                    if tempered:
                        index, logp, _, _ = self._forward_logprobs(self.model, plain, micro, trained,
                                                                   False)
                        plain_diffs.append(np.abs(logp.float().cpu().numpy() - rollout[index]))
        finally:
            self.model.train(was_training)
        self.checked_rollouts = True
        diff = np.concatenate(diffs)
        mean = float(diff.mean()) if diff.size else 0.0
        plain_mean = float(np.concatenate(plain_diffs).mean()) if plain_diffs else float("inf")
        # Temperature-1 log-probs while sampling at another temperature: they fit the model's
        # own distribution far better than the sampled one, even where the mean stays small.
        at_temperature_one = mean > 0.02 and plain_mean < mean / 4
        if mean <= limit and not at_temperature_one:
            return
        hints = []
        if at_temperature_one:
            hints.append(f"they match temperature 1 (mean |log-ratio| {plain_mean:.4f} there): a "
                         "rollout server that reports temperature-1 log-probs while sampling at "
                         "another temperature")
        if (batch["top_p"] < 1).any() or (batch["top_k"] > 0).any():
            hints.append("log-probs of the distribution before top-k / top-p truncation")
        hints.append("rollouts from other weights than the learner's")
        raise BatchError(
            f"the rollout log-probs are not this policy's: mean |log-ratio| {mean:.3f} over "
            f"{diff.size} tokens before any update (at most {limit} expected; "
            f"max_initial_log_ratio sets it, 0 disables the check). Likely causes: "
            + "; ".join(hints))

    def _scheduled_lr(self) -> float:
        lr = self.config.resolved_learning_rate()
        if self.config.warmup_steps > 0:
            lr *= min(1.0, (self.optimizer_steps + 1) / self.config.warmup_steps)
        return lr


def _empty_stats() -> dict:
    return {"loss": 0.0, "pg_loss": 0.0, "kl": 0.0, "entropy": 0.0, "clip_fraction": 0.0,
            "clip_low_fraction": 0.0, "clip_high_fraction": 0.0, "capped_fraction": 0.0,
            "mean_ratio": 1.0, "max_ratio": 1.0, "min_ratio": 1.0, "grad_norm": 0.0,
            "learner_tokens": 0, "processed_tokens": 0, "learner_tokens_per_s": 0.0,
            "trained_tokens_per_s": 0.0, "optimizer_steps": 0, "mean_advantage": 0.0}


STATS_DOC = """learn() statistics:
  loss, pg_loss      the normalised objective (with / without the KL term), mean over minibatches
  kl                 mean k3 KL to the initial policy over trained tokens (0 when kl_coef = 0)
  entropy            mean entropy of log_softmax(logits / T) over trained tokens
  clip_fraction      share of trained tokens whose gradient the clip removed (= low + high)
  clip_low_fraction  A < 0 and ratio < 1 - clip_low;  clip_high_fraction: A > 0 and ratio > 1 + clip_high
  capped_fraction    A < 0 and ratio > ratio_cap (gradient truncated, not removed)
  mean_ratio, max_ratio, min_ratio   exp(logp - rollout_logp) over trained tokens, as each
                     minibatch saw them (with one minibatch: before the update)
  grad_norm          gradient norm before clipping (mean over minibatches)
  learner_tokens     trained tokens;  processed_tokens: input positions run forward and backward
                     (prompt and completion, no padding)
  learner_tokens_per_s  processed_tokens / learn_s;  trained_tokens_per_s: learner_tokens / learn_s
  learn_s            wall time of the update (validation included);  steps: rows in the batch
  updated            whether the weights changed (false: nothing to train on, every advantage 0,
                     or every optimizer step skipped); a caller hands weights back only then
  skipped            why some or all optimizer steps were skipped (absent when none was)
  masked_fraction    share of loss_mask tokens left out by mask_length_limited / mask_truncated
"""
