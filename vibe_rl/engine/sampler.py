"""Seeded sampling that does not depend on batch composition.

`gumbel_sample` draws one token per row from softmax(logp) with the Gumbel-max
trick; its noise is a counter-based hash (SplitMix64) of (request seed, token
index, vocab id), so a seeded request draws the same tokens alone or inside any
batch, and a whole batch is sampled in a few vectorised tensor ops. `sample` is
the paged engine's graph-safe step on top of it (fused into two Triton kernels,
`paged_kernels.sample`, when no row needs top-p or its top logprobs).
"""

from __future__ import annotations

from typing import Any

from vibe_rl.extras import require

# SplitMix64 constants as signed int64 (torch has no uint64 arithmetic; int64 products wrap).
_GOLDEN = 0x9E3779B97F4A7C15 - 2**64
_M1 = 0xBF58476D1CE4E5B9 - 2**64
_M2 = 0x94D049BB133111EB - 2**64


def _srl(z: Any, k: int) -> Any:
    """Logical right shift of int64 values."""
    return (z >> k) & ((1 << (64 - k)) - 1)


def _mix(z: Any) -> Any:
    z = z + _GOLDEN
    z = (z ^ _srl(z, 30)) * _M1
    z = (z ^ _srl(z, 31)) * _M2
    return z ^ _srl(z, 31)


def gumbel_sample(logp: Any, seeds: Any, steps: Any) -> Any:
    """One exact sample per row of softmax(logp): argmax(logp - log E) with E ~ Exp(1).

    The noise is a counter-based hash of (request seed, token index, vocab id), so
    a seeded request draws the same tokens alone or in any batch, and all rows
    are sampled in a few vectorised ops (no per-row generator calls).
    logp (b, V), seeds (b,), steps (b,) -> token ids (b,).
    """
    torch = require("torch", "sampling")
    key = _mix(seeds ^ _mix(steps))  # (b,)
    vocab = torch.arange(logp.shape[-1], device=logp.device, dtype=torch.long)  # (V,)
    bits = _mix(key[:, None] + vocab[None, :] * _GOLDEN)  # (b, V)
    uniform = (_srl(bits, 40).float() + 0.5) / float(1 << 24)  # (b, V) in (0, 1)
    exp_noise = -torch.log(uniform)  # Exp(1)
    return (logp - torch.log(exp_noise)).argmax(dim=-1)


def sampling_mode(top_ps: list[float], top_logprobs: list[int]) -> str:
    """'nucleus' when a row has top_p < 1, 'dist' when a row wants its top logprobs (the full
    distributions are kept), else 'fast' (only the tokens and their logprobs: the fused sampler)."""
    return "nucleus" if any(p < 1 for p in top_ps) else "dist" if any(top_logprobs) else "fast"


def sample(logits: Any, params: Any, seeds: Any, mode: str, kernels: Any = None) -> tuple[Any, Any, Any]:
    """Graph-safe sampling: logits (b, V), params (2, b) = temperature, top_p; seeds (2, b) = seed, token index.

    -> (token ids (b,), their logprobs (b,), the sampling distribution's logprobs (b, V), or None in
    the 'fast' mode of `sampling_mode`). Greedy rows (temperature 0) take the argmax; the others draw
    with the batch-invariant Gumbel sampler (fused into two kernels in the 'fast' mode on a GPU).
    """
    from vibe_rl.rl.logprobs import sampling_logprobs

    torch = require("torch")
    temps, top_p = params[0], params[1]
    if mode == "fast" and kernels is not None:
        return (*kernels.sample(logits, temps, seeds[0], seeds[1]), None)
    logp = sampling_logprobs(logits, temps, top_p, nucleus=mode == "nucleus")  # (b, V)
    picked = torch.where(temps == 0, logits.argmax(dim=-1), gumbel_sample(logp, seeds[0], seeds[1]))  # (b,)
    return picked, logp.gather(-1, picked[:, None]).squeeze(-1), None if mode == "fast" else logp
