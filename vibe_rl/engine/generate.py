"""Batched decoding: left-padded prompts, one KV cache, per-request sampling.

Every row keeps its own temperature, top_p, max_tokens, stop strings and random
generator; a row leaves the batch (and the KV cache) as soon as it finishes, so
the batch shrinks instead of decoding padding. The logprob recorded for each
token is its entry in the distribution it was sampled from
(`vibe_rl.rl.logprobs.sampling_logprobs`).
"""

from __future__ import annotations

import functools
import inspect
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from vibe_rl.engine.base import Generation, SamplingParams
from vibe_rl.extras import require
from vibe_rl.rl.logprobs import sampling_logprobs


@dataclass
class Request:
    prompt_ids: list[int]
    sampling: SamplingParams
    seed: int
    future: Future = field(default_factory=Future)


@dataclass
class _Row:
    req: Request
    budget: int  # most tokens this row may still produce
    window: int  # tokens to decode when checking stop strings
    ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish: str | None = None


def _select_rows(cache: Any, index: Any) -> None:
    if hasattr(cache, "batch_select_indices"):
        cache.batch_select_indices(index)
    else:  # older transformers
        cache.reorder_cache(index)


@functools.lru_cache(maxsize=32)
def _forward_args(cls: type) -> tuple[str, bool]:
    params = inspect.signature(cls.forward).parameters
    return ("cache" if "cache" in params else "past_key_values"), "logits_to_keep" in params  # renamed in 5.24


def _forward(model: Any, cache: Any = None, **kwargs: Any) -> tuple[Any, Any]:
    """One forward pass with a KV cache -> (cache, last-position logits (b, V))."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft wraps the model
    name, keep_arg = _forward_args(type(base))
    if cache is not None:
        kwargs[name] = cache
    if keep_arg:
        kwargs["logits_to_keep"] = 1  # skip the (B, L, V) prompt logits
    out = model(use_cache=True, **kwargs)
    cache = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
    return cache, out.logits[:, -1, :]


def generate_batch(model: Any, tokenizer: Any, requests: list[Request], *, eos_ids: set[int], pad_id: int,
                   max_model_len: int, version: int = 0) -> list[Generation]:
    """Decode all `requests` together; returns one Generation per request, in order."""
    torch = require("torch", "generating with the torch engine")
    device = next(model.parameters()).device
    rows = []
    for req in requests:
        window = max((len(s.encode()) for s in req.sampling.stop), default=0) + 4
        budget = min(req.sampling.max_tokens, max_model_len - len(req.prompt_ids))
        rows.append(_Row(req, budget, window))

    # Left-pad so every row's last prompt token sits in the last column.
    width = max(len(r.req.prompt_ids) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)  # (B, L)
    mask = torch.zeros((len(rows), width), dtype=torch.long)  # (B, L)
    for i, r in enumerate(rows):
        n = len(r.req.prompt_ids)
        ids[i, width - n:] = torch.tensor(r.req.prompt_ids, dtype=torch.long)
        mask[i, width - n:] = 1
    ids, mask = ids.to(device), mask.to(device)
    pos = (mask.cumsum(-1) - 1).clamp(min=0)  # (B, L): real positions start at 0 in every row
    temps = torch.tensor([r.req.sampling.temperature for r in rows], device=device)  # (B,)
    top_ps = torch.tensor([r.req.sampling.top_p for r in rows], device=device)  # (B,)
    greedy = temps == 0  # (B,)
    seeds = torch.tensor([r.req.seed for r in rows], dtype=torch.long, device=device)  # (B,)

    active = list(range(len(rows)))  # rows still decoding, in batch order
    with torch.inference_mode():
        cache, logits = _forward(model, input_ids=ids, attention_mask=mask, position_ids=pos)  # logits (b, V)
        next_pos = pos[:, -1] + 1  # (b,)
        while True:
            logp = sampling_logprobs(logits, temps, top_ps)  # (b, V)
            steps = torch.tensor([len(rows[i].ids) for i in active], device=device)  # (b,)
            sampled = gumbel_sample(logp, seeds, steps)  # (b,)
            picked = torch.where(greedy, logits.argmax(dim=-1), sampled)  # (b,)
            chosen = logp.gather(-1, picked[:, None]).squeeze(-1)  # (b,)
            tokens, token_logprobs = picked.tolist(), chosen.tolist()  # one device sync per step
            for j, i in enumerate(active):
                row, tok = rows[i], tokens[j]
                row.ids.append(tok)
                row.logprobs.append(token_logprobs[j])
                if tok in eos_ids:
                    row.finish = "stop"
                elif row.req.sampling.stop and _hits_stop(tokenizer, row):
                    row.finish = "stop"
                elif len(row.ids) >= row.budget:
                    row.finish = "length"
            keep = [j for j, i in enumerate(active) if rows[i].finish is None]
            if not keep:
                break
            if len(keep) < len(active):  # drop finished rows from the batch and the cache
                index = torch.tensor(keep, device=device)
                _select_rows(cache, index)
                mask, next_pos, temps, top_ps = mask[index], next_pos[index], temps[index], top_ps[index]
                greedy, seeds = greedy[index], seeds[index]
                tokens = [tokens[j] for j in keep]
                active = [active[j] for j in keep]
            step = torch.tensor(tokens, device=device)[:, None]  # (b, 1)
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)  # (b, L + t)
            cache, logits = _forward(model, cache, input_ids=step, attention_mask=mask,
                                     position_ids=next_pos[:, None])
            next_pos = next_pos + 1
    return [Generation(r.ids, r.logprobs, r.finish or "length", version, len(r.req.prompt_ids)) for r in rows]


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


def _hits_stop(tokenizer: Any, row: _Row) -> bool:
    tail = tokenizer.decode(row.ids[-row.window:], skip_special_tokens=False)
    return any(s in tail for s in row.req.sampling.stop)
