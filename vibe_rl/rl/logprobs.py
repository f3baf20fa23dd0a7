"""Log-probabilities under the distribution a token was actually sampled from.

One function serves both sides, so rollout logprobs and training logprobs are
the same quantity:

* the engine samples from `exp(sampling_logprobs(logits, T, p))` and records the
  sampled token's entry;
* the trainer re-scores recorded tokens with `sampling_logprobs(..., targets=ids)`.

The distribution is: logits / T, then the top-p nucleus (the smallest set of
tokens whose mass reaches p, renormalised). T == 0 (greedy) is scored at T = 1.
When `targets` is given, the target token is always kept in the nucleus, so its
logprob stays finite after the weights move (at the rollout weights it already is
in the nucleus, because it was sampled from it).
"""

from __future__ import annotations

from typing import Any

from vibe_rl.extras import require


def sampling_logprobs(logits: Any, temperature: Any, top_p: Any, targets: Any = None,
                      nucleus: bool | None = None) -> Any:
    """logits (N, V), temperature (N,), top_p (N,), targets (N,) or None -> log-probs (N, V), fp32.

    `nucleus` says whether any top_p < 1 when the caller knows (a CUDA-graph capture cannot
    ask the device); None checks.
    """
    torch = require("torch", "computing logprobs")
    logits = logits.float()
    t = torch.where(temperature > 0, temperature, torch.ones_like(temperature)).float()
    scaled = logits / t[:, None]  # (N, V)
    if nucleus if nucleus is not None else bool((top_p < 1).any()):
        sorted_logits, order = scaled.sort(dim=-1, descending=True)  # (N, V)
        probs = sorted_logits.softmax(dim=-1)
        before = probs.cumsum(dim=-1) - probs  # mass of the tokens ranked above each one
        drop_sorted = before >= top_p.float()[:, None]  # the first token always stays
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)  # back to vocab order
        if targets is not None:
            drop[torch.arange(drop.shape[0], device=drop.device), targets] = False
        scaled = scaled.masked_fill(drop, float("-inf"))
    return scaled.log_softmax(dim=-1)


CHUNK_ROWS = 1024  # rows of (N, V) fp32 work alive at once while training


def token_logprobs(logits: Any, targets: Any, temperature: Any, top_p: Any) -> Any:
    """logits (N, V), targets (N,) -> the targets' log-probs (N,) under the sampling distribution.

    While training, rows are scored CHUNK_ROWS at a time, each chunk's fp32 work recomputed in the
    backward pass (activation checkpointing) instead of kept: at a 152k vocabulary every 1024 rows
    would otherwise hold ~2.5 GB of fp32 copies until the backward. Rows are independent, so the
    values and gradients are those of one call on all rows.
    """
    torch = require("torch", "computing logprobs")
    if logits.shape[0] <= CHUNK_ROWS or not (torch.is_grad_enabled() and logits.requires_grad):
        return _picked(logits, targets, temperature, top_p)
    from torch.utils.checkpoint import checkpoint

    return torch.cat([checkpoint(_picked, logits[i:i + CHUNK_ROWS], targets[i:i + CHUNK_ROWS],
                                 temperature[i:i + CHUNK_ROWS], top_p[i:i + CHUNK_ROWS], use_reentrant=False)
                      for i in range(0, logits.shape[0], CHUNK_ROWS)])


def _picked(logits: Any, targets: Any, temperature: Any, top_p: Any) -> Any:
    logp = sampling_logprobs(logits, temperature, top_p, targets=targets)  # (N, V)
    return logp.gather(-1, targets[:, None]).squeeze(-1)  # (N,)
