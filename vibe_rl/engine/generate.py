"""Batched decoding: left-padded prompts, one KV cache, per-request sampling.

Every row keeps its own temperature, top_p, max_tokens, stop strings and seed.
A row leaves the batch (and the KV cache) as soon as it finishes and its future
is resolved right away, so a short answer never waits for a long one. Between
decode steps, requests that arrived meanwhile are prefilled and join the running
batch (their KV cache is left-padded to the batch's width), when the model's
cache is the plain dynamic kind; otherwise they wait for the next batch.
The logprob recorded for each token is its entry in the distribution it was
sampled from (`vibe_rl.rl.logprobs.sampling_logprobs`). A request's optional
`on_token` callback sees each token right after it is sampled (streaming), and
`top_logprobs` > 0 records that many alternatives per position (one top-k per
step for the whole batch).
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from vibe_rl.engine.base import Generation, SamplingParams, TokenCallback
from vibe_rl.engine.sampler import gumbel_sample
from vibe_rl.errors import ConfigError, SequenceTooLongError
from vibe_rl.extras import require

log = logging.getLogger(__name__)


def checked_prompt(prompt_ids: list[int], max_model_len: int, vocab_size: int) -> list[int]:
    """The prompt as ints, refused when it is empty, leaves no room to generate, or holds an id outside the
    vocabulary (every engine's `submit` checks the same way)."""
    prompt_ids = [int(t) for t in prompt_ids]
    if not prompt_ids:
        raise ConfigError("The prompt is empty; pass at least one token id.")
    if len(prompt_ids) >= max_model_len:
        raise SequenceTooLongError(
            f"The prompt has {len(prompt_ids)} tokens but max_model_len is {max_model_len}, leaving no room "
            "to generate. Shorten the conversation (drop old turns) or raise model.max_model_len.")
    bad = [t for t in prompt_ids if not 0 <= t < vocab_size]
    if bad:
        raise ConfigError(f"Prompt token ids {bad[:5]} are outside the vocabulary (size {vocab_size}).")
    return prompt_ids


@dataclass
class Request:
    prompt_ids: list[int]
    sampling: SamplingParams
    seed: int
    future: Future = field(default_factory=Future)
    on_token: TokenCallback | None = None


@dataclass
class _Row:
    req: Request
    budget: int  # most tokens this row may produce
    window: int  # tokens to decode when checking stop strings
    ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    top: list[list[tuple[int, float]]] = field(default_factory=list)
    finish: str | None = None

    def push(self, token: int, logprob: float, top: list[tuple[int, float]] | None) -> None:
        """Record one sampled token and tell the request's on_token callback (a failing one is dropped)."""
        self.ids.append(token)
        self.logprobs.append(logprob)
        if top is not None:
            self.top.append(top)
        if self.req.on_token is not None:
            try:
                self.req.on_token(token, logprob)
            except Exception:
                log.exception("on_token callback failed; no more tokens are streamed to it")
                self.req.on_token = None


@dataclass
class _Running:
    """The live batch: b rows, a KV cache of width W, and each row's next-token logits."""

    rows: list[_Row]
    cache: Any
    logits: Any  # (b, V)
    mask: Any  # (b, W) 1 on real tokens, 0 on left padding
    next_pos: Any  # (b,) position id of each row's next token
    params: dict[str, Any]  # temperature, top_p, greedy, seed: each (b,)

    def select(self, index: Any) -> None:
        _cache_select(self.cache, index)
        self.rows = [self.rows[j] for j in index.tolist()]
        self.mask, self.next_pos = self.mask[index], self.next_pos[index]
        self.params = {k: v[index] for k, v in self.params.items()}


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


def _cache_select(cache: Any, index: Any) -> None:
    if hasattr(cache, "batch_select_indices"):
        cache.batch_select_indices(index)
    else:  # older transformers
        cache.reorder_cache(index)


def _plain_layers(cache: Any) -> list[Any] | None:
    """The cache's per-layer objects when every one is a plain DynamicLayer (keys/values tensors)."""
    layers = getattr(cache, "layers", None)
    if layers and all(type(layer).__name__ == "DynamicLayer" and layer.keys is not None for layer in layers):
        return list(layers)
    return None


def _prefill(model: Any, rows: list[_Row], pad_id: int, device: Any) -> _Running:
    torch = require("torch", "generating with the torch engine")
    width = max(len(r.req.prompt_ids) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)  # (b, L)
    mask = torch.zeros((len(rows), width), dtype=torch.long)  # (b, L)
    for i, r in enumerate(rows):  # left-pad: every row's last prompt token sits in the last column
        n = len(r.req.prompt_ids)
        ids[i, width - n:] = torch.tensor(r.req.prompt_ids, dtype=torch.long)
        mask[i, width - n:] = 1
    ids, mask = ids.to(device), mask.to(device)
    pos = (mask.cumsum(-1) - 1).clamp(min=0)  # (b, L): real positions start at 0 in every row
    cache, logits = _forward(model, input_ids=ids, attention_mask=mask, position_ids=pos)
    temps = torch.tensor([r.req.sampling.temperature for r in rows], device=device)
    params = {
        "temperature": temps,
        "top_p": torch.tensor([r.req.sampling.top_p for r in rows], device=device),
        "greedy": temps == 0,
        "seed": torch.tensor([r.req.seed for r in rows], dtype=torch.long, device=device),
    }
    return _Running(list(rows), cache, logits, mask, pos[:, -1] + 1, params)


def _merge(run: _Running, new: _Running) -> None:
    """Append `new`'s rows to `run`, left-padding the narrower KV cache and mask with zeros."""
    torch = require("torch", "generating with the torch engine")
    F = torch.nn.functional
    wa, wb = run.mask.shape[1], new.mask.shape[1]
    pa, pb = max(0, wb - wa), max(0, wa - wb)
    for la, lb in zip(_plain_layers(run.cache), _plain_layers(new.cache), strict=True):
        la.keys = torch.cat([F.pad(la.keys, (0, 0, pa, 0)), F.pad(lb.keys, (0, 0, pb, 0))], dim=0)  # (b, h, W, d)
        la.values = torch.cat([F.pad(la.values, (0, 0, pa, 0)), F.pad(lb.values, (0, 0, pb, 0))], dim=0)
    run.mask = torch.cat([F.pad(run.mask, (pa, 0)), F.pad(new.mask, (pb, 0))], dim=0)  # (b, W)
    run.logits = torch.cat([run.logits, new.logits], dim=0)
    run.next_pos = torch.cat([run.next_pos, new.next_pos], dim=0)
    run.params = {k: torch.cat([v, new.params[k]], dim=0) for k, v in run.params.items()}
    run.rows = run.rows + new.rows


def generate_batch(model: Any, tokenizer: Any, requests: list[Request], *, eos_ids: set[int], pad_id: int,
                   max_model_len: int, version: int = 0, max_batch_size: int = 64,
                   poll: Callable[[int], list[Request]] | None = None,
                   stats: dict[str, int] | None = None) -> list[Generation]:
    """Decode `requests` (and any that `poll(free_slots)` hands over while decoding) as one batch.

    Each request's future is resolved as soon as its row finishes; returns every
    Generation in the order the requests entered. On an error, every unresolved
    future gets the exception, which is then re-raised. `stats` (optional) counts
    batches, requests, generated_tokens, largest_batch (most rows decoded
    together) and joined_requests.
    """
    from vibe_rl.rl.batch import stable_attention  # the same attention backends and distribution as training
    from vibe_rl.rl.logprobs import sampling_logprobs

    stats = stats if stats is not None else {}
    torch = require("torch", "generating with the torch engine")
    device = next(model.parameters()).device

    def rows_for(reqs: list[Request]) -> list[_Row]:
        return [_Row(req, min(req.sampling.max_tokens, max_model_len - len(req.prompt_ids)),
                     max((len(s.encode()) for s in req.sampling.stop), default=0) + 4) for req in reqs]

    every = rows_for(requests)
    stats["batches"] = stats.get("batches", 0) + 1
    try:
        with _no_autograd(torch, model), stable_attention():
            run = _prefill(model, every, pad_id, device)
            joinable = poll is not None and _plain_layers(run.cache) is not None
            while True:
                free = max_batch_size - len(run.rows)
                joined = poll(free) if joinable and free > 0 else []
                if joined:
                    new_rows = rows_for(joined)
                    every += new_rows
                    _merge(run, _prefill(model, new_rows, pad_id, device))
                    stats["joined_requests"] = stats.get("joined_requests", 0) + len(joined)
                stats["largest_batch"] = max(stats.get("largest_batch", 0), len(run.rows))

                p = run.params
                logp = sampling_logprobs(run.logits, p["temperature"], p["top_p"])  # (b, V)
                steps = torch.tensor([len(r.ids) for r in run.rows], device=device)  # (b,)
                sampled = gumbel_sample(logp, p["seed"], steps)  # (b,)
                picked = torch.where(p["greedy"], run.logits.argmax(dim=-1), sampled)  # (b,)
                chosen = logp.gather(-1, picked[:, None]).squeeze(-1)  # (b,)
                tokens, token_logprobs = picked.tolist(), chosen.tolist()  # one device sync per step
                tops = _top_logprobs(logp, run.rows)
                for j, row in enumerate(run.rows):
                    row.push(tokens[j], token_logprobs[j], tops[j])
                    if tokens[j] in eos_ids or (row.req.sampling.stop and _hits_stop(tokenizer, row)):
                        row.finish = "stop"
                    elif len(row.ids) >= row.budget:
                        row.finish = "length"
                    if row.finish:  # count first, so a caller woken by its result sees the counters
                        stats["requests"] = stats.get("requests", 0) + 1
                        stats["generated_tokens"] = stats.get("generated_tokens", 0) + len(row.ids)
                        row.req.future.set_result(_generation(row, version))

                keep = [j for j, row in enumerate(run.rows) if row.finish is None]
                if not keep:
                    break
                if len(keep) < len(run.rows):  # drop finished rows from the batch and the cache
                    run.select(torch.tensor(keep, device=device))
                    tokens = [tokens[j] for j in keep]
                step = torch.tensor(tokens, device=device)[:, None]  # (b, 1)
                run.mask = torch.cat([run.mask, torch.ones_like(run.mask[:, :1])], dim=1)  # (b, W + 1)
                run.cache, run.logits = _forward(model, run.cache, input_ids=step, attention_mask=run.mask,
                                                 position_ids=run.next_pos[:, None])
                run.next_pos = run.next_pos + 1
    except BaseException as exc:
        for row in every:
            if not row.req.future.done():
                row.req.future.set_exception(exc)
        raise
    return [_generation(r, version) for r in every]


def _no_autograd(torch: Any, model: Any) -> Any:
    """inference_mode, but no_grad for a model FSDP2 shards (a server without generation replicas): its
    gathered weights would become inference tensors, which its next training step may not update."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:
        return torch.inference_mode()
    return torch.no_grad() if isinstance(model, FSDPModule) else torch.inference_mode()


def _top_logprobs(logp: Any, rows: list[_Row]) -> list[list[tuple[int, float]] | None]:
    """Each row's `top_logprobs` most likely (id, logprob) pairs, finite ones only; None for rows that want none."""
    want = [r.req.sampling.top_logprobs for r in rows]
    k = max(want)
    if k == 0:
        return [None] * len(rows)
    values, ids = logp.topk(k, dim=-1)  # (b, k), most likely first
    values, ids = values.tolist(), ids.tolist()
    return [[(ids[j][i], values[j][i]) for i in range(n) if values[j][i] != float("-inf")] if n else None
            for j, n in enumerate(want)]


def _generation(row: _Row, version: int) -> Generation:
    return Generation(list(row.ids), list(row.logprobs), row.finish or "length", version, len(row.req.prompt_ids),
                      [list(t) for t in row.top])


def _hits_stop(tokenizer: Any, row: _Row) -> bool:
    tail = tokenizer.decode(row.ids[-row.window:], skip_special_tokens=False)
    return any(s in tail for s in row.req.sampling.stop)
