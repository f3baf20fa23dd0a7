"""Turning Samples into padded tensors, and scoring them with a model.

Too-long samples are truncated from the right (input ids, loss mask and
logprobs together, so they stay aligned) and counted; nothing is dropped
silently.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from vibe_rl.extras import require
from vibe_rl.rl.logprobs import token_logprobs
from vibe_rl.rl.samples import Sample


@dataclass
class Prepared:
    samples: list[Sample]
    truncated_samples: int = 0
    truncated_loss_tokens: int = 0
    dropped_samples: int = 0


def prepare(samples: Sequence[Sample], max_len: int, max_samples: int | None = None) -> Prepared:
    """Cap the number of samples (extra ones dropped and counted) and truncate long ones from the right."""
    kept = list(samples)
    out = Prepared([])
    if max_samples is not None and len(kept) > max_samples:
        out.dropped_samples = len(kept) - max_samples
        kept = kept[:max_samples]
    for s in kept:
        if len(s.input_ids) > max_len:
            out.truncated_samples += 1
            out.truncated_loss_tokens += sum(s.loss_mask[max_len:])
            s = replace(s, input_ids=s.input_ids[:max_len], loss_mask=s.loss_mask[:max_len],
                        old_logprobs=s.old_logprobs[:max_len], players=list(s.players))
        out.samples.append(s)
    return out


def micro_batches(samples: Sequence[Sample], size: int, tokens: int = 0, passes: int = 0) -> list[list[Sample]]:
    """Length-sorted samples (less padding per pass) cut into the micro-batches of one update.

    - `tokens` 0: `size` sequences per micro-batch.
    - `tokens` > 0: each micro-batch takes the next sequences while rows x longest row (its padded
      size) stays within `tokens`; a sequence longer than `tokens` runs alone.
    - `passes` > 0: the micro-batch with the most rows is halved until there are at least `passes`
      (the sharded trainer's ranks must all run the same number of passes); needs that many samples.
    """
    ordered = sorted(samples, key=lambda s: len(s.input_ids))
    chunks: list[list[Sample]] = []
    for s in ordered:
        last = chunks[-1] if chunks else None
        fits = (last is not None and (len(last) < size if tokens <= 0 else (len(last) + 1) * len(s.input_ids) <= tokens))
        if fits:
            last.append(s)
        else:
            chunks.append([s])
    if passes > len(ordered):
        raise ValueError(f"{passes} passes need at least {passes} samples, got {len(ordered)}")
    while len(chunks) < passes:
        i = max(range(len(chunks)), key=lambda k: len(chunks[k]))
        half = (len(chunks[i]) + 1) // 2
        chunks[i:i + 1] = [chunks[i][:half], chunks[i][half:]]
    return chunks


def collate(samples: Sequence[Sample], pad_id: int, device: Any) -> dict[str, Any]:
    """Right-padded tensors: ids/attention/loss_mask/old_logprobs (B, T); advantage/temperature/top_p (B,)."""
    torch = require("torch", "training")
    width = max(len(s.input_ids) for s in samples)
    b = len(samples)
    ids = torch.full((b, width), pad_id, dtype=torch.long)
    attention = torch.zeros((b, width), dtype=torch.long)
    loss_mask = torch.zeros((b, width), dtype=torch.bool)
    old = torch.zeros((b, width), dtype=torch.float32)
    for i, s in enumerate(samples):
        n = len(s.input_ids)
        ids[i, :n] = torch.tensor(s.input_ids)
        attention[i, :n] = 1
        loss_mask[i, :n] = torch.tensor(s.loss_mask, dtype=torch.bool)
        old[i, :n] = torch.tensor(s.old_logprobs, dtype=torch.float32)
    batch = {
        "input_ids": ids, "attention_mask": attention, "loss_mask": loss_mask, "old_logprobs": old,
        "advantage": torch.tensor([s.advantage for s in samples], dtype=torch.float32),
        "temperature": torch.tensor([s.temperature for s in samples], dtype=torch.float32),
        "top_p": torch.tensor([s.top_p for s in samples], dtype=torch.float32),
    }
    return {k: v.to(device) for k, v in batch.items()}


def stable_attention() -> Any:
    """Keep SDPA off the cuDNN backend: it builds a new execution plan for every new shape, and
    decoding (a longer cache each step) or length-varying micro-batches hit new shapes constantly
    (measured on an H200: ~60 ms per decode step with cuDNN, ~5 ms without)."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:  # torch < 2.3 has no cuDNN attention to avoid
        return contextlib.nullcontext()
    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])


def score(model: Any, batch: dict[str, Any], temperature_aware: bool = True) -> tuple[Any, Any]:
    """Log-probs of the loss tokens under `model` -> (logp (N,), selection mask (B, T-1)).

    Position t of the logits predicts token t+1, so everything is shifted by one:
    the returned values follow the order of `batch[...][:, 1:][mask]`.

    Only the positions that predict a written token in some row are projected onto the vocabulary (a
    Hugging Face model's `logits_to_keep`): an agent's prompts are long and its answers short, so the
    full (B, T, V) logits were most of a step's memory and a fifth of its compute for nothing. A model
    without `logits_to_keep` gets the full logits, then the same positions.
    """
    torch = require("torch", "training")
    mask = batch["loss_mask"][:, 1:]  # (B, T-1): which predicted tokens the model wrote
    keep = mask.any(dim=0).nonzero().squeeze(1)  # (K,) the positions some row is scored at
    with stable_attention():
        logits = _kept_logits(model, batch, keep)  # (B, K, V)
    targets = batch["input_ids"][:, 1:][mask]  # (N,)
    picked = logits[mask[:, keep]]  # (N, V): row-major over (B, K) with K ascending, the order of `targets`
    shape = mask.shape
    if temperature_aware:
        temps = batch["temperature"][:, None].expand(shape)[mask]  # (N,)
        top_p = batch["top_p"][:, None].expand(shape)[mask]  # (N,)
    else:  # plain next-token likelihood (SFT)
        temps = torch.ones_like(targets, dtype=torch.float32)
        top_p = torch.ones_like(temps)
    return token_logprobs(picked, targets, temps, top_p), mask


_FULL_LOGITS: set[type] = set()  # model classes whose forward has no `logits_to_keep`


def _kept_logits(model: Any, batch: dict[str, Any], keep: Any) -> Any:
    """The logits at positions `keep` (B, K, V), computed only there when the model allows it."""
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    if type(model) not in _FULL_LOGITS:
        try:
            logits = model(**inputs, logits_to_keep=keep).logits
        except TypeError as exc:  # transformers < 4.50, or a custom model
            if "logits_to_keep" not in str(exc):
                raise
            _FULL_LOGITS.add(type(model))
        else:
            if logits.shape[1] == keep.numel():
                return logits
            _FULL_LOGITS.add(type(model))  # it took the keyword and returned every position
            return logits[:, keep]
    return model(**inputs).logits[:, keep]
