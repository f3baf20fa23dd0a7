"""Seeded sampling that does not depend on batch composition.

`gumbel_sample` draws one token per row from softmax(logp) with the Gumbel-max
trick; its noise is a counter-based hash (SplitMix64) of (request seed, token
index, vocab id), so a seeded request draws the same tokens alone or inside any
batch, and a whole batch is sampled in a few vectorised tensor ops.
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


