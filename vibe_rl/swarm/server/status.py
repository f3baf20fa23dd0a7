"""`GET /control/status` as the typed `EngineStatus` of `vibe_rl.swarm.protocol`.

Built from the parts that hold each field (the serving class's episodes and notes, the pool,
the trainer's step and last update, the engine), never from a hand-built dict the client
would have to trust: every field is described in `EngineStatus`, and docs/client.md holds the table
`status_reference()` makes of them (a test keeps it equal); rewrite it after a change with

    python -m vibe_rl.swarm.server.status docs/client.md
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from vibe_rl.schema import TrainJob
from vibe_rl.schema.reference import rewrite, table
from vibe_rl.swarm.protocol import EngineStatus, OpponentRecord, PoolStatus, RunningEpisode
from vibe_rl.swarm.server.pool import Pool, Tally
from vibe_rl.swarm.server.registry import Episode


def engine_status(*, state: str, job: TrainJob | None, engine: Any, pool: Pool | None, tally: Tally,
                  incomplete_group_ttl: float, running: Iterable[Episode], trainer: Any, notes: list[str],
                  errors: Iterable[str], counters: dict[str, int], snapshots: Any = None) -> EngineStatus:
    """`trainer` is the `Trainer` while an engine runs (its step and last update), else None; `snapshots` the
    static router's `Snapshots` (the learner's record against past checkpoints)."""
    now = time.monotonic()
    counts = pool.summary() if pool is not None else {}
    pool_status = PoolStatus(**counts, discarded_episodes=tally.discarded, aborted_episodes=tally.aborted,
                             expired_episodes=tally.expired, incomplete_group_ttl_s=incomplete_group_ttl)
    episodes = sorted(running, key=lambda e: e.last_activity)
    return EngineStatus(
        state=state,
        global_step=trainer.global_step if trainer is not None else 0,
        weight_version=getattr(engine, "version", 0) if engine is not None else 0,
        model=job.model.path if job else "",
        total_steps=job.train.total_steps if job else 0,
        pool=pool_status,
        running_count=len(episodes),
        prepared_count=sum(1 for e in episodes if e.prepared is not None),
        running_episodes=[RunningEpisode(episode_uuid=e.uuid, llm_calls=e.llm_calls,
                                         idle_s=round(0.0 if e.inflight else now - e.last_activity, 2))
                          for e in episodes[:200]],
        tasks=pool.tasks_table() if pool is not None else [],
        last_update=trainer.last_update if trainer is not None else None,
        notes=list(notes),
        errors=list(errors),
        devices=_devices(engine),
        job=job,
        counters=dict(counters),
        chat_template=_template_view(engine),
        opponents=[OpponentRecord(model=name, step=step, games=games, learner_wins=wins,
                                  draw_weight=round(snapshots.weight(name, step), 6))
                   for (name, step), (wins, games) in sorted(snapshots.results.items())] if snapshots else [],
    )


def _devices(engine: Any) -> list[dict[str, Any]]:
    """One entry per process (rank), with its GPU when it has one."""
    if engine is None:
        return []
    return getattr(engine, "devices", None) or ([{"rank": 0, "device": str(engine.device)}]
                                                if hasattr(engine, "device") else [])


def _template_view(engine: Any) -> dict[str, str] | None:
    tokenizer = getattr(engine, "tokenizer", None) if engine is not None else None
    if tokenizer is None:
        return None
    from vibe_rl.swarm.server.chat import template_support

    return template_support(tokenizer).describe()


STATUS_START, STATUS_END = "<!-- status-reference:start -->", "<!-- status-reference:end -->"


def status_reference() -> str:
    """docs/client.md's table of the status fields (`job` is the TrainJob of the job reference)."""
    return table(EngineStatus)


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        changed = rewrite(Path(arg), STATUS_START, STATUS_END, status_reference)
        print(f"{arg}: {'rewritten' if changed else 'up to date'}")
