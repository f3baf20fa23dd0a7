"""Engine boot, resume and one GRPO weight update (server side; imports the engine lazily).

An update, top to bottom:
1. The pool hands over whole task groups (episodes sharing a task_id).
2. Each group's rewards become group-normalised advantages (`vibe_rl.rl.advantages`);
   every episode's advantage is shared by all of its samples. A per-seat `train.advantage`
   (seat, individual, role_baseline, zero_sum) instead gives each sample the advantage of the
   seat(s) whose turns it holds, computed over the whole batch after step 3.
   A group that cannot be trained on (a reward out of range, broken turns) is rejected
   alone and reported; the other groups still train.
3. An episode's trainable turns (static-model calls are context only) become
   samples with `vibe_rl.rl.samples.build_samples` (multi-turn merge by token prefix).
4. The trainer caps the batch at `train.max_samples` samples (`vibe_rl.rl.batch.prepare`,
   the one place the cap lives); extra ones are dropped and counted as `dropped_samples`.
5. `engine.train(samples)` takes one optimiser step; every `save_freq` steps the
   engine is checkpointed to `<experiment.dir>/checkpoints/step_NNNNNN` and
   `checkpoints/latest.json` is rewritten atomically after the save completed. The
   save comes after the step is counted: a failed save (e.g. ENOSPC) is reported with
   its path, and the episodes of steps newer than the latest checkpoint are retrained
   after a restart (`Store.untrained`), so nothing is lost.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vibe_rl.errors import VibeRLError
from vibe_rl.schema import EngineConfig, TrainJob
from vibe_rl.swarm.observe.loggers import MetricsSink, make_loggers
from vibe_rl.swarm.observe.metrics import batch_metrics, engine_metrics
from vibe_rl.swarm.server.pool import CompletedEpisode


class CheckpointError(VibeRLError, OSError):
    """A checkpoint could not be written (the message names the path and the OS error)."""


@dataclass
class Booted:
    engine: Any
    store: Any
    step: int
    recovered: list[CompletedEpisode] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sink: Any = None  # MetricsSink of the job's experiment.loggers


def checkpoint_root(job: TrainJob) -> Path:
    return Path(job.experiment.dir) / "checkpoints"


def latest_checkpoint(job: TrainJob) -> tuple[int, Path] | None:
    marker = checkpoint_root(job) / "latest.json"
    if not marker.is_file():
        return None
    info = json.loads(marker.read_text())
    path = checkpoint_root(job) / info["dir"]
    return (int(info["step"]), path) if path.is_dir() else None


def boot(job: TrainJob) -> Booted:
    """Load the engine, resume from the latest checkpoint, and recover untrained episodes."""
    from vibe_rl.engine import load_engine
    from vibe_rl.swarm.server.store import Store

    Path(job.experiment.dir).mkdir(parents=True, exist_ok=True)
    # loggers first: a missing extra (tensorboard, wandb, swanlab) fails the boot at once, naming the extra
    sink = MetricsSink(make_loggers(job.experiment.loggers, job.experiment.dir, job.experiment.name))
    try:
        engine = load_engine(job.model, job.train, trainable=True)
    except BaseException:
        sink.close()
        raise
    store = Store(Path(job.experiment.dir) / "swarm.sqlite")
    notes, step = [], 0
    found = latest_checkpoint(job)
    if found:
        step, path = found
        engine.load(path)
        notes.append(f"resumed from checkpoint {path} at global step {step}")
    recovered = store.untrained(step)
    if recovered:
        late = sum(1 for _ in recovered)
        notes.append(f"recovered {late} completed but untrained episodes from {store.path} into the pool "
                     "(they will be trained on in the next updates)")
    tokenizer = getattr(engine, "tokenizer", None)
    if tokenizer is not None:
        from vibe_rl.swarm.server.chat import template_support

        template_note = template_support(tokenizer).note()
        if template_note:
            notes.append(template_note)
    store.set_meta("job", job.model_dump(mode="json"))
    return Booted(engine, store, step, recovered, notes, sink)


def load_frozen(path: str, base: EngineConfig | None = None) -> Any:
    """A frozen (not trainable) local engine for a static model."""
    from vibe_rl.engine import load_engine

    cfg = (base or EngineConfig()).model_copy(update={"path": path, "lora": EngineConfig().lora})
    return load_engine(cfg, None, trainable=False)


def _group_samples(group: list[CompletedEpisode], max_abs_reward: float) -> tuple[list[Any], Any]:
    """One task group's samples and advantages; raises when the group cannot be trained on."""
    from vibe_rl.rl.advantages import grpo_advantages
    from vibe_rl.rl.samples import build_samples

    bad = [ep.reward for ep in group if not (math.isfinite(ep.reward) and abs(ep.reward) <= max_abs_reward)]
    if bad:
        raise ValueError(f"reward {bad[0]!r} is not finite or exceeds |r| <= {max_abs_reward:g}")
    adv = grpo_advantages([ep.task_id for ep in group], [ep.reward for ep in group])
    samples: list[Any] = []
    for ep, value in zip(group, adv.values, strict=True):
        turns = [t for t in ep.turns if t.trainable]  # the recorded turns themselves, no copy
        samples.extend(build_samples(turns, task_id=ep.task_id, episode_id=ep.episode_uuid, advantage=value))
    return samples, adv


def _group_seats(group: list[CompletedEpisode], samples: list[Any], mode: str, metadata: dict[str, Any],
                 max_abs_reward: float) -> tuple[list[Any], int]:
    """Per-seat credit (train.advantage other than 'group'): one task group's seats and how many lack an
    individual reward; raises on a bad metadata['seat_rewards'] (then the group is rejected alone)."""
    from vibe_rl.rl.advantages import INDIVIDUAL_MODES, episode_seats, seat_rewards_of

    seats: list[Any] = []
    missing = 0
    for ep in group:
        own = seat_rewards_of(metadata.get(ep.episode_uuid)) if mode in INDIVIDUAL_MODES else {}
        bad = [r for r in own.values() if abs(r) > max_abs_reward]
        if bad:
            raise ValueError(f"seat reward {bad[0]!r} exceeds |r| <= {max_abs_reward:g}")
        ep_samples = [s for s in samples if s.episode_id == ep.episode_uuid]
        ep_seats, ep_missing = episode_seats(ep_samples, ep.episode_uuid, ep.task_id, ep.reward, mode, own)
        seats += ep_seats
        missing += ep_missing
    return seats, missing


@dataclass
class Batch:
    samples: list[Any]
    info: dict[str, float]
    groups: list[list[CompletedEpisode]]  # the groups the samples come from
    rejected: list[tuple[list[CompletedEpisode], str]] = field(default_factory=list)  # (group, why)


def build_batch(groups: list[list[CompletedEpisode]], max_abs_reward: float = 1e6, advantage: str = "group",
                metadata: dict[str, Any] | None = None) -> Batch:
    """Samples of every group that can be trained on; a group that cannot (bad reward, broken
    turns) is rejected alone, with the reason, and never takes the other groups down with it.
    `advantage` is train.advantage; a per-seat mode reads `metadata` (episode uuid -> output metadata)."""
    seats: list[Any] = []
    missing = 0
    samples: list[Any] = []
    kept: list[list[CompletedEpisode]] = []
    rejected: list[tuple[list[CompletedEpisode], str]] = []
    groups_n = all_equal = 0
    for group in groups:
        try:
            group_samples, adv = _group_samples(group, max_abs_reward)
            group_seats, group_missing = (_group_seats(group, group_samples, advantage, metadata or {}, max_abs_reward)
                                          if advantage != "group" else ([], 0))
        except Exception as exc:  # one group's data: reject it alone
            rejected.append((group, f"{type(exc).__name__}: {exc}"))
            continue
        kept.append(group)
        samples.extend(group_samples)
        groups_n += adv.num_groups
        all_equal += adv.num_all_equal_groups
        seats += group_seats
        missing += group_missing
    extra: dict[str, float] = {}
    if advantage != "group":  # per-seat credit replaces the episode advantages (vibe_rl.rl.advantages)
        from vibe_rl.rl.advantages import assign_seat_advantages, seat_advantages

        seat_adv = seat_advantages(seats, advantage)
        assign_seat_advantages(samples, seats, seat_adv)
        groups_n, all_equal = seat_adv.num_groups, seat_adv.num_all_equal_groups
        extra = {"seats": len(seats), "seat_rewards_missing": missing}
    info = {**batch_metrics(kept), "groups": groups_n, "all_equal_groups": all_equal,
            "rejected_groups": len(rejected),
            # episodes that never called a model through their key (a client that bypasses ep.openai())
            "episodes_without_calls": sum(1 for g in kept for ep in g if not ep.turns), **extra}
    return Batch(samples, info, kept, rejected)


def train_step(engine: Any, job: TrainJob, batch: Batch) -> dict[str, Any]:
    """One optimiser step on a built batch (no checkpoint: `save_checkpoint` is separate, so a
    failed save can never leave the step counter and the weights disagreeing)."""
    metrics = engine_metrics(engine.train(batch.samples)) if batch.samples else {"skipped_empty": 1}
    metrics.update(batch.info)
    return metrics


def save_checkpoint(engine: Any, job: TrainJob, step: int) -> Path:
    """Checkpoint to <experiment.dir>/checkpoints/step_NNNNNN, then point latest.json at it.

    A failed write (disk full, read-only, permissions) raises CheckpointError naming the path and
    the OS error; latest.json keeps pointing at the previous checkpoint, and the partial files are
    removed so they do not hold the disk."""
    root = checkpoint_root(job)
    name = f"step_{step:06d}"
    tmp = root / "latest.json.tmp"
    try:
        engine.save(root / name)
        tmp.write_text(json.dumps({"step": step, "dir": name}))
        os.replace(tmp, root / "latest.json")  # atomic: a crash leaves the previous marker intact
    except Exception as exc:  # OSError, or a library's wrapper of one (safetensors, torch.save)
        tmp.unlink(missing_ok=True)
        raise CheckpointError(f"Checkpoint of step {step} to {root / name} failed: {_os_error(exc, root)} "
                              "The weights in memory are intact and the previous checkpoint is still the "
                              "latest.") from exc
    return root / name


def _os_error(exc: BaseException, root: Path) -> str:
    """What went wrong, with the errno name when one can be found (libraries wrap OSError in their own types)."""
    num = getattr(exc, "errno", None)
    if num is None:
        found = re.search(r"(?:os error|code:)\s*(\d+)", str(exc))
        num = int(found.group(1)) if found else None
    if num is None and ("No space left" in str(exc) or "file write failed" in str(exc)):
        num = errno.ENOSPC
    try:
        free = shutil.disk_usage(root if root.exists() else root.parent).free
    except OSError:
        free = -1
    name = errno.errorcode.get(num, "error") if num is not None else type(exc).__name__
    where = getattr(exc, "filename", None) or root
    text = f"{name} ({os.strerror(num) if num is not None else exc}) writing {where} ({free} bytes free)."
    if num in (errno.ENOSPC, errno.EDQUOT) or 0 <= free < 1 << 20:
        text += " The disk is full: free space or point experiment.dir at a larger disk."
    return text
