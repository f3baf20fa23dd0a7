"""The pool of completed episodes, grouped by task_id (the GRPO group).

A weight update starts when the collection policy holds:

- `tasks` (default): `batch_size` tasks each hold at least `grpo_n` episodes.
- `non_dummy_tasks`: as `tasks`, but only groups whose rewards differ count
  (a group with equal rewards has zero advantage everywhere and teaches nothing).
- `episodes`: `batch_size * grpo_n` episodes, whatever their tasks.

Pure Python: no torch, no fastapi.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from vibe_rl.schema import CollectionPolicy, TrainConfig


@dataclass
class TurnRecord:
    """One LLM call of an episode, as the server saw it."""

    prompt_ids: list[int]
    response_ids: list[int]
    logprobs: list[float]
    messages: list[dict[str, Any]]
    response_text: str = ""
    player: str | None = None
    model: str = ""
    static: bool = False  # a static opponent: recorded as context, never trained
    weight_version: int = 0
    temperature: float = 1.0
    top_p: float = 1.0
    ts: float = 0.0


@dataclass
class CompletedEpisode:
    episode_uuid: str
    task_id: str
    reward: float
    turns: list[TurnRecord] = field(default_factory=list)
    ended_at: float = 0.0


def _std(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


class Pool:
    """Completed, not yet trained episodes by task_id (insertion ordered: oldest task first)."""

    def __init__(self, train: TrainConfig):
        self.train = train
        self.groups: dict[str, list[CompletedEpisode]] = {}

    # ------------------------------------------------------------ queries

    def __len__(self) -> int:
        return sum(len(g) for g in self.groups.values())

    def _complete(self) -> list[str]:
        return [t for t, g in self.groups.items() if len(g) >= self.train.grpo_n]

    def _non_dummy(self, task_ids: list[str]) -> list[str]:
        return [t for t in task_ids if _std([e.reward for e in self.groups[t]]) > 1e-8]

    def ready(self) -> bool:
        policy, n = self.train.policy, self.train.batch_size
        if policy == CollectionPolicy.episodes:
            return len(self) >= n * self.train.grpo_n
        complete = self._complete()
        if policy == CollectionPolicy.non_dummy_tasks:
            return len(self._non_dummy(complete)) >= n
        return len(complete) >= n

    def summary(self) -> dict[str, Any]:
        complete = self._complete()
        episodes = len(self)
        return {
            "policy": self.train.policy.value,
            "completed_episodes": episodes,
            "completed_tasks": len(complete),
            "completed_non_dummy_tasks": len(self._non_dummy(complete)),
            "target_tasks": self.train.batch_size,
            "target_episodes": self.train.batch_size * self.train.grpo_n,
            "grpo_n": self.train.grpo_n,
            "avg_episodes_per_task": round(episodes / len(self.groups), 3) if self.groups else 0.0,
        }

    def tasks_table(self, limit: int = 200) -> list[dict[str, Any]]:
        """Per-task rows, largest groups first (a pile-up under one task_id shows at the top)."""
        rows = []
        for task_id, group in self.groups.items():
            rewards = [e.reward for e in group]
            rows.append({"task_id": task_id, "episodes": len(group),
                         "reward_mean": round(sum(rewards) / len(rewards), 4),
                         "reward_std": round(_std(rewards), 4)})
        rows.sort(key=lambda r: -r["episodes"])
        return rows[:limit]

    # ------------------------------------------------------------ changes

    def add(self, episode: CompletedEpisode) -> None:
        self.groups.setdefault(episode.task_id, []).append(episode)

    def take(self) -> tuple[list[list[CompletedEpisode]], list[list[CompletedEpisode]]]:
        """Remove and return (groups to train on, groups skipped as dummy). Call when ready()."""
        policy, n = self.train.policy, self.train.batch_size
        if policy == CollectionPolicy.episodes:
            chosen, skipped = list(self.groups), []
        else:
            complete = self._complete()
            if policy == CollectionPolicy.non_dummy_tasks:
                non_dummy = self._non_dummy(complete)
                chosen = non_dummy[:n]
                skipped = [t for t in complete if t not in set(non_dummy)]
            else:
                chosen, skipped = complete[:n], []
        train = [self.groups.pop(t) for t in chosen]
        dummy = [self.groups.pop(t) for t in skipped]
        return train, dummy
