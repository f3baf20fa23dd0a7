"""Splitting one GRPO batch over the ranks of a group, and merging what each rank measured.

The single-process loss is `sum over loss tokens / T` (T: loss tokens of the whole batch).
Rank r computes its part on its own samples as `sum_r / T_r` (that is what `grpo_step`
does on any list of samples). Its gradient is multiplied by `world * T_r / T` on the way back
(see `vibe_rl.engine.fsdp`), and FSDP averages gradients over the `world` ranks, so the update
is the gradient of `sum_r sum_r / T`: the single-process loss, up to float rounding.

Every rank must run the same number of forward/backward passes (each is a collective under
FSDP): `Split.passes`, the most micro-batches any rank's samples make (`rl.batch.micro_batches`,
by count or by token budget). A rank with fewer halves its fullest micro-batches until it has as
many (`micro_batches(..., passes=)`); a rank with fewer samples than passes gets padding samples:
two tokens, no loss token, so they add nothing to the loss or the gradient, but take part in the
collectives.
"""

from __future__ import annotations

from dataclasses import dataclass

from vibe_rl.rl.batch import micro_batches, prepare
from vibe_rl.rl.samples import Sample


@dataclass
class Split:
    shards: list[list[Sample]]  # per rank: its samples, padding included
    padding: list[int]  # per rank: how many of its samples are padding
    samples: list[Sample]  # the whole batch after capping/truncation (what the metrics describe)
    total_tokens: int  # T: loss tokens of the whole batch
    passes: int = 0  # micro-batches every rank runs
    truncated_samples: int = 0
    truncated_loss_tokens: int = 0
    dropped_samples: int = 0


def padding_sample(pad_id: int) -> Sample:
    return Sample(input_ids=[pad_id, pad_id], loss_mask=[0, 0], old_logprobs=[0.0, 0.0], advantage=1.0,
                  task_id="", episode_id="padding")


def split_batch(samples: list[Sample], world: int, max_len: int, max_samples: int, kl_on: bool,
                pad_id: int, micro_batch_size: int = 1, micro_batch_tokens: int = 0) -> Split:
    """Deterministic (every rank computes the same split from the same list)."""
    prep = prepare(samples, max_len, max_samples)
    runs = [s for s in prep.samples if kl_on or s.advantage != 0.0]  # what grpo_step runs through the model
    idle = [s for s in prep.samples if not (kl_on or s.advantage != 0.0)]  # only count in T
    shards: list[list[Sample]] = [[] for _ in range(world)]
    # longest first, each to the rank with the fewest tokens so far: balanced work per rank
    load = [0] * world
    for s in sorted(runs, key=lambda s: -len(s.input_ids)):
        r = min(range(world), key=lambda i: (len(shards[i]), load[i]))
        shards[r].append(s)
        load[r] += len(s.input_ids)
    for i, s in enumerate(idle):
        shards[i % world].append(s)
    passes = max(len(micro_batches([s for s in shard if kl_on or s.advantage != 0.0], micro_batch_size,
                                   micro_batch_tokens)) for shard in shards)
    padding = []
    for shard in shards:
        need = max(0, passes - sum(1 for s in shard if kl_on or s.advantage != 0.0))
        shard.extend(padding_sample(pad_id) for _ in range(need))
        padding.append(need)
    return Split(shards, padding, prep.samples, sum(s.num_loss_tokens for s in prep.samples), passes,
                 prep.truncated_samples, prep.truncated_loss_tokens, prep.dropped_samples)


def scored_tokens(shard: list[Sample], kl_on: bool) -> int:
    return sum(s.num_loss_tokens for s in shard if kl_on or s.advantage != 0.0)


def merge_metrics(per_rank: list[dict[str, float]], split: Split, kl_on: bool, version: int) -> dict[str, float]:
    """One metrics dict for the whole batch, with the single-process meaning of every field."""
    T = max(split.total_tokens, 1)
    local_T = [sum(s.num_loss_tokens for s in shard) for shard in split.shards]
    n = [scored_tokens(shard, kl_on) for shard in split.shards]
    n_all = sum(n)
    finite = all(m.get("loss") == m.get("loss") for m in per_rank)  # NaN != NaN

    def token_mean(key: str, default: float = 0.0) -> float:
        return sum(m.get(key, 0.0) * w for m, w in zip(per_rank, n, strict=True)) / n_all if n_all else default

    real = split.samples
    out = dict(per_rank[0])
    out.update({
        "loss": sum(m["loss"] * t for m, t in zip(per_rank, local_T, strict=True)) / T if finite else float("nan"),
        "pg_loss": sum(m.get("pg_loss", 0.0) * t for m, t in zip(per_rank, local_T, strict=True)) / T,
        "kl": token_mean("kl"),
        "clip_frac": token_mean("clip_frac"),
        "ratio_mean": token_mean("ratio_mean", 1.0),
        "ratio_max": max(m.get("ratio_max", 0.0) for m in per_rank),
        "logprob_abs_diff": token_mean("logprob_abs_diff"),
        "num_samples": float(len(real)),
        "num_loss_tokens": float(split.total_tokens),
        "zero_advantage_samples": float(sum(s.advantage == 0.0 for s in real)),
        "advantage_abs_mean": sum(abs(s.advantage) for s in real) / max(len(real), 1),
        "staleness_mean": sum(version - s.weight_version for s in real) / max(len(real), 1),
        "truncated_samples": float(split.truncated_samples),
        "truncated_loss_tokens": float(split.truncated_loss_tokens),
        "dropped_samples": float(split.dropped_samples),
        "time_s": max(m.get("time_s", 0.0) for m in per_rank),
        "world_size": float(len(per_rank)),
        "padding_samples": float(sum(split.padding)),
    })
    if not finite:
        out["grad_norm"] = float("nan")
    return out
