"""One GRPO update: a token-level clipped policy-gradient step against rollout logprobs.

What the loss does
------------------
For every token t that the model wrote (loss_mask == 1) in sample i:

    logp_t    = log pi_theta(token_t | prefix)      under the sampling distribution used at rollout:
                                                    logits / temperature, then top-p renormalised
                                                    (the sampled token is always kept in the nucleus)
    ratio_t   = exp(logp_t - old_logp_t)            old_logp_t = the engine's rollout logprob
    pg_t      = -min(ratio_t * A_i, clip(ratio_t, 1 - eps, 1 + eps) * A_i)
    kl_t      = exp(ref_t - logp_t) - (ref_t - logp_t) - 1     (k3 estimator; only if kl_coef > 0)
    loss      = sum_t (pg_t + kl_coef * kl_t) / (number of loss tokens in the whole batch)

A_i is the sample's group-normalised advantage (vibe_rl.rl.advantages), the same
for every token of the sample. Normalising by the batch's token count (not per
sequence) gives every written token equal weight, long answers included.

What it does not do
-------------------
* No value function, no GAE, no entropy bonus, no reward shaping per token.
* No KL penalty by default (kl_coef = 0): then no reference model is loaded at all.
* One optimiser step per call (no PPO epochs); the ratio only corrects for the
  policy having moved since the rollout (stale samples) and for numerics.
* Samples whose advantage is 0 are not run through the model when KL is off:
  their loss is exactly 0, so skipping them changes nothing but the compute.
  They still count in the token normaliser.

Learning rate
-------------
Update k (1-based: `step` updates were applied before it) uses
lr_k = lr x min(1, k / warmup_steps), or lr when warmup_steps = 0. Adam moves every
weight by about lr on its first steps, whatever the noise in its gradient; a short
warmup keeps a few noisy early batches from undoing a warm start.

Safety
------
Micro-batches of `micro_batch_size` sequences (or of at most `micro_batch_tokens` padded
tokens) accumulate gradients; the loss is the same whatever the cut. The global
gradient norm is clipped to `max_grad_norm`. A non-finite loss or gradient norm
skips the step (no weight change, gradients dropped), which is counted in
`nan_skipped_total` and reported as `nan_skipped = 1` in the metrics.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from vibe_rl.extras import require
from vibe_rl.rl.batch import collate, micro_batches, prepare, score
from vibe_rl.rl.samples import Sample

if TYPE_CHECKING:
    from vibe_rl.schema import TrainConfig


def grpo_step(model: Any, optimizer: Any, samples: list[Sample], cfg: TrainConfig, *, pad_id: int, device: Any,
              max_len: int, ref_model: Any = None, version: int = 0, step: int = 0,
              on_micro_batch: Callable[[int, bool, Any], Any] | None = None,
              passes: int = 0) -> tuple[dict[str, float], bool]:
    """One update of `model` with `optimizer` -> (metrics, applied).

    `ref_model` is the frozen KL reference (None with LoRA: the base model with the adapter
    off is the reference); `version` is the current weight version, for the staleness metric;
    `step` is the number of updates applied before this one, for the learning-rate warmup.
    `applied` is False when the step was skipped because something was not finite.
    `on_micro_batch(index, is_last, loss) -> loss` (a sharded trainer's hook; None in one process)
    runs before each micro-batch's backward: it may set up gradient sync and return a non-finite
    loss to make this rank skip the step together with the others; `passes` is the number of
    micro-batches every rank runs (0 in one process: as many as `micro_batches` makes).
    """
    torch = require("torch", "GRPO training")
    opt = optimizer
    started = time.monotonic()

    # 1. Cap and truncate; count what was cut.
    prep = prepare(samples, max_len, cfg.max_samples)
    kl_on = cfg.kl_coef > 0
    total_tokens = sum(s.num_loss_tokens for s in prep.samples)
    active = [s for s in prep.samples if kl_on or s.advantage != 0.0]

    # 2. Accumulate gradients over micro-batches.
    model.train()
    opt.zero_grad(set_to_none=True)
    sums = dict(loss=0.0, pg_loss=0.0, kl=0.0, clipped=0.0, ratio=0.0, ratio_max=0.0, abs_diff=0.0, tokens=0.0)
    finite = True
    try:
        chunks = micro_batches(active, cfg.micro_batch_size, cfg.micro_batch_tokens, passes)
        for index, chunk in enumerate(chunks):
            batch = collate(chunk, pad_id, device)
            logp, mask = score(model, batch)  # (N,) new logprobs of the written tokens
            old = batch["old_logprobs"][:, 1:][mask]  # (N,)
            adv = batch["advantage"][:, None].expand(mask.shape)[mask]  # (N,)

            ratio = torch.exp(logp - old)  # (N,)
            clipped_ratio = ratio.clamp(1 - cfg.clip_eps, 1 + cfg.clip_eps)
            pg = -torch.minimum(ratio * adv, clipped_ratio * adv)  # (N,)
            per_token = pg
            if kl_on:
                ref_logp = _reference_logprobs(model, ref_model, batch)  # (N,), no grad
                delta = ref_logp - logp
                kl = torch.exp(delta) - delta - 1  # (N,) k3: unbiased, always >= 0
                per_token = pg + cfg.kl_coef * kl
                sums["kl"] += float(kl.detach().sum())

            loss = per_token.sum() / max(total_tokens, 1)  # scalar; summed over micro-batches = batch mean
            if on_micro_batch is not None:
                loss = on_micro_batch(index, index == len(chunks) - 1, loss)
            if not torch.isfinite(loss):
                finite = False
                break
            loss.backward()

            with torch.no_grad():
                sums["loss"] += float(loss)
                sums["pg_loss"] += float(pg.sum())
                sums["clipped"] += float(((ratio - clipped_ratio).abs() > 0).float().mul(adv != 0).sum())
                sums["ratio"] += float(ratio.sum())
                sums["ratio_max"] = max(sums["ratio_max"], float(ratio.max())) if ratio.numel() else sums["ratio_max"]
                sums["abs_diff"] += float((logp - old).abs().sum())
                sums["tokens"] += float(logp.numel())

        # 3. Clip the global gradient norm and step, unless something was not finite.
        params = [p for p in model.parameters() if p.requires_grad]
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)) if finite and active else 0.0
        if not math.isfinite(grad_norm):
            finite = False
        if finite:
            for group in opt.param_groups:
                group["lr"] = scheduled_lr(cfg, step)
            opt.step()
        opt.zero_grad(set_to_none=True)
    finally:
        model.eval()

    # 4. Report.
    n = max(sums["tokens"], 1.0)
    metrics = {
        "loss": sums["loss"] if finite else float("nan"),
        "pg_loss": sums["pg_loss"] / max(total_tokens, 1),
        "kl": sums["kl"] / n,
        "clip_frac": sums["clipped"] / n,
        "ratio_mean": sums["ratio"] / n if sums["tokens"] else 1.0,
        "ratio_max": sums["ratio_max"],
        "logprob_abs_diff": sums["abs_diff"] / n,  # rollout vs train logprob gap (staleness + numerics)
        "grad_norm": grad_norm if finite else float("nan"),
        "num_samples": float(len(prep.samples)),
        "num_loss_tokens": float(total_tokens),
        "zero_advantage_samples": float(sum(s.advantage == 0.0 for s in prep.samples)),
        "advantage_abs_mean": sum(abs(s.advantage) for s in prep.samples) / max(len(prep.samples), 1),
        "staleness_mean": sum(version - s.weight_version for s in prep.samples) / max(len(prep.samples), 1),
        "truncated_samples": float(prep.truncated_samples),
        "truncated_loss_tokens": float(prep.truncated_loss_tokens),
        "dropped_samples": float(prep.dropped_samples),
        "lr": float(opt.param_groups[0]["lr"]),
        "time_s": time.monotonic() - started,
    }
    return metrics, finite


def scheduled_lr(cfg: TrainConfig, step: int) -> float:
    """The learning rate of the update after `step` applied ones (see "Learning rate" above)."""
    if cfg.warmup_steps <= 0:
        return cfg.lr
    return cfg.lr * min(1.0, (step + 1) / cfg.warmup_steps)


def _reference_logprobs(model: Any, ref_model: Any, batch: dict[str, Any]) -> Any:
    """Log-probs under the frozen reference: the separate ref model, or the base model with LoRA off."""
    torch = require("torch", "GRPO training")
    with torch.no_grad():
        if ref_model is not None:
            return score(ref_model, batch)[0]
        with model.disable_adapter():  # peft: the untouched base weights are the reference
            return score(model, batch)[0]
