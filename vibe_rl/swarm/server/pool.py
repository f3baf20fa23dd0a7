"""The pool of completed episodes, grouped by their GRPO group key (`CompletedEpisode.task_id`: the group the
episode's begin named, else its task's task_id).

A weight update starts when the collection policy holds:

- `tasks` (default): `batch_size` tasks each hold at least `grpo_n` episodes.
- `non_dummy_tasks`: as `tasks`, but only groups whose rewards differ count
  (a group with equal rewards has zero advantage everywhere and teaches nothing).
- `episodes`: `batch_size * grpo_n` episodes, whatever their tasks.

Pure Python: no torch, no uvicorn.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import time
from dataclasses import dataclass, field
from typing import Any

from vibe_rl.rl.advantages import all_equal
from vibe_rl.rl.samples import Turn
from vibe_rl.schema import CollectionPolicy, TrainConfig


@dataclass
class Tally:
    """Episodes set aside instead of trained on, by why (status `pool.*_episodes`; none is dropped silently)."""

    discarded: int = 0  # idle past their discard timeout (the serving class's reaper)
    aborted: int = 0  # aborted by their client, or running when the engine stopped
    expired: int = 0  # of task groups that stayed incomplete past the TTL (Trainer.expire_groups)


@dataclass
class CompletedEpisode:
    episode_uuid: str
    task_id: str  # the GRPO group key (the begin's group, else the task's id); also the store's task_id column
    reward: float
    turns: list[Turn] = field(default_factory=list)  # the one recorded-call type (vibe_rl.rl.samples)
    ended_at: float = 0.0


def _std(values: list[float]) -> float:
    """Population std that cannot overflow (values are scaled by their largest magnitude)."""
    if len(values) < 2:
        return 0.0
    scale = max(abs(v) for v in values)
    if not math.isfinite(scale) or scale == 0.0:
        return 0.0 if scale == 0.0 else math.inf
    xs = [v / scale for v in values]
    mean = math.fsum(xs) / len(xs)
    return scale * math.sqrt(math.fsum((x - mean) * (x - mean) for x in xs) / len(xs))


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values) if values else 0.0


class Pool:
    """Completed, not yet trained episodes by task_id (insertion ordered: oldest task first).

    Counters are kept up to date on every add/take, so `ready()` and `summary()` cost O(1)
    however many groups the pool holds (end_episode calls ready() every time). `filled` is set whenever an
    added episode leaves the pool ready for an update: it wakes the Trainer's loop."""

    def __init__(self, train: TrainConfig):
        self.train = train
        self.groups: dict[str, list[CompletedEpisode]] = {}
        self.episodes = 0
        self.complete: dict[str, None] = {}  # ordered set: groups with >= grpo_n episodes
        self.non_dummy: dict[str, None] = {}  # complete groups whose rewards differ
        self.touched: dict[str, float] = {}  # task_id -> time.monotonic() of its latest episode
        self.filled = asyncio.Event()

    # ------------------------------------------------------------ queries

    def __len__(self) -> int:
        return self.episodes

    def ready(self) -> bool:
        policy, n = self.train.policy, self.train.batch_size
        if policy == CollectionPolicy.episodes:
            return self.episodes >= n * self.train.grpo_n
        if policy == CollectionPolicy.non_dummy_tasks:
            return len(self.non_dummy) >= n
        return len(self.complete) >= n

    def summary(self) -> dict[str, Any]:
        return {
            "policy": self.train.policy.value,
            "completed_episodes": self.episodes,
            "completed_tasks": len(self.complete),
            "completed_non_dummy_tasks": len(self.non_dummy),
            "target_tasks": self.train.batch_size,
            "target_episodes": self.train.batch_size * self.train.grpo_n,
            "grpo_n": self.train.grpo_n,
            "avg_episodes_per_task": round(self.episodes / len(self.groups), 3) if self.groups else 0.0,
            **self.incomplete(),
        }

    def incomplete(self, now: float | None = None) -> dict[str, Any]:
        """Groups still short of grpo_n episodes (none under the 'episodes' policy) and the oldest one's idle age."""
        if self.train.policy == CollectionPolicy.episodes:
            return {"incomplete_tasks": 0, "oldest_incomplete_idle_s": 0.0}
        now = time.monotonic() if now is None else now
        ages = [now - self.touched.get(t, now) for t in self.groups if t not in self.complete]
        return {"incomplete_tasks": len(ages), "oldest_incomplete_idle_s": round(max(ages, default=0.0), 1)}

    def tasks_table(self, limit: int = 200) -> list[dict[str, Any]]:
        """Per-task rows, largest groups first (a pile-up under one task_id shows at the top)."""
        rows = []
        for task_id, group in heapq.nlargest(limit, self.groups.items(), key=lambda kv: len(kv[1])):
            rewards = [e.reward for e in group]
            rows.append({"task_id": task_id, "episodes": len(group),
                         "reward_mean": round(_mean(rewards), 4),
                         "reward_std": round(_std(rewards), 4)})
        return rows

    # ------------------------------------------------------------ changes

    def add(self, episode: CompletedEpisode) -> None:
        group = self.groups.setdefault(episode.task_id, [])
        group.append(episode)
        self.episodes += 1
        self.touched[episode.task_id] = time.monotonic()
        if len(group) >= self.train.grpo_n:
            self.complete[episode.task_id] = None
            if episode.task_id not in self.non_dummy and not all_equal([e.reward for e in group]):
                self.non_dummy[episode.task_id] = None
        if self.ready():
            self.filled.set()

    def _pop(self, task_id: str) -> list[CompletedEpisode]:
        group = self.groups.pop(task_id)
        self.episodes -= len(group)
        self.complete.pop(task_id, None)
        self.non_dummy.pop(task_id, None)
        self.touched.pop(task_id, None)
        return group

    def expire(self, ttl: float, now: float | None = None) -> list[list[CompletedEpisode]]:
        """Remove and return incomplete groups without a new episode for `ttl` seconds (dead clients)."""
        if self.train.policy == CollectionPolicy.episodes:
            return []
        now = time.monotonic() if now is None else now
        stale = [t for t in self.groups if t not in self.complete and now - self.touched.get(t, now) > ttl]
        return [self._pop(t) for t in stale]

    def put_back(self, groups: list[list[CompletedEpisode]]) -> None:
        """Return groups taken by an update that failed (they stay trainable)."""
        for group in groups:
            for episode in group:
                self.add(episode)

    def take(self) -> tuple[list[list[CompletedEpisode]], list[list[CompletedEpisode]]]:
        """Remove and return (groups to train on, groups skipped as dummy). Call when ready()."""
        policy, n = self.train.policy, self.train.batch_size
        if policy == CollectionPolicy.episodes:
            chosen, skipped = list(self.groups), []
        elif policy == CollectionPolicy.non_dummy_tasks:
            chosen = list(self.non_dummy)[:n]
            skipped = [t for t in self.complete if t not in self.non_dummy]
        else:
            chosen, skipped = list(self.complete)[:n], []
        return [self._pop(t) for t in chosen], [self._pop(t) for t in skipped]
