"""Engine boot, resume and one GRPO weight update (server side; imports the engine lazily).

An update, top to bottom:
1. The pool hands over whole task groups (episodes sharing a task_id).
2. Each group's rewards become group-normalised advantages (`vibe_rl.rl.advantages`);
   every episode's advantage is shared by all of its samples.
3. An episode's trainable turns (static-model calls are context only) become
   samples with `vibe_rl.rl.samples.build_samples` (multi-turn merge by token prefix).
4. At most `train.max_samples` samples go in; extra ones are dropped and counted.
5. `engine.train(samples)` takes one optimiser step; every `save_freq` steps the
   engine is checkpointed to `<experiment.dir>/checkpoints/step_NNNNNN` and
   `checkpoints/latest.json` is rewritten atomically after the save completed.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vibe_rl.schema import EngineConfig, TrainJob
from vibe_rl.swarm.loggers import MetricsSink, make_loggers
from vibe_rl.swarm.metrics import batch_metrics, engine_metrics
from vibe_rl.swarm.pool import CompletedEpisode


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
    from vibe_rl.swarm.store import Store

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
    store.set_meta("job", job.model_dump(mode="json"))
    return Booted(engine, store, step, recovered, notes, sink)


def load_frozen(path: str, base: EngineConfig | None = None) -> Any:
    """A frozen (not trainable) local engine for a static model."""
    from vibe_rl.engine import load_engine

    cfg = (base or EngineConfig()).model_copy(update={"path": path, "lora": EngineConfig().lora})
    return load_engine(cfg, None, trainable=False)


def build_batch(groups: list[list[CompletedEpisode]], max_samples: int) -> tuple[list[Any], dict[str, float]]:
    from vibe_rl.rl.advantages import grpo_advantages
    from vibe_rl.rl.samples import Turn, build_samples

    episodes = [ep for group in groups for ep in group]
    adv = grpo_advantages([ep.task_id for ep in episodes], [ep.reward for ep in episodes])
    samples: list[Any] = []
    for ep, value in zip(episodes, adv.values, strict=True):
        turns = [Turn(t.prompt_ids, t.response_ids, t.logprobs, player=t.player, weight_version=t.weight_version,
                      temperature=t.temperature, top_p=t.top_p)
                 for t in ep.turns if not t.static and t.prompt_ids and t.response_ids]
        samples.extend(build_samples(turns, task_id=ep.task_id, episode_id=ep.episode_uuid, advantage=value))
    dropped = max(0, len(samples) - max_samples)
    samples = samples[:max_samples]
    return samples, {**batch_metrics(groups), "samples": len(samples), "dropped_samples": dropped,
                     "groups": adv.num_groups, "all_equal_groups": adv.num_all_equal_groups}


def train_step(engine: Any, job: TrainJob, groups: list[list[CompletedEpisode]], step: int) -> dict[str, Any]:
    samples, info = build_batch(groups, job.train.max_samples)
    metrics = engine_metrics(engine.train(samples)) if samples else {"skipped_empty": 1}
    metrics.update(info)
    if job.train.save_freq and step % job.train.save_freq == 0:
        save_checkpoint(engine, job, step)
        metrics["checkpoint"] = step
    return metrics


def save_checkpoint(engine: Any, job: TrainJob, step: int) -> Path:
    root = checkpoint_root(job)
    name = f"step_{step:06d}"
    engine.save(root / name)
    tmp = root / "latest.json.tmp"
    tmp.write_text(json.dumps({"step": step, "dir": name}))
    os.replace(tmp, root / "latest.json")  # atomic: a crash leaves the previous marker intact
    return root / name
