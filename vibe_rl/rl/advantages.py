"""GRPO advantages: each episode's reward, normalised within its task group.

For the episodes of one task (one GRPO group) with rewards r_1..r_n:

    A_i = (r_i - mean(r)) / (std(r) + eps)      std is the population std (ddof=0)

A group whose rewards are all equal (including a group of one episode) carries
no learning signal: its advantages are exactly 0 and it is counted in
`num_all_equal_groups`, so a run that only ever sees such groups is visible.
With `scale_by_std=False` the advantage is just r_i - mean(r) (Dr. GRPO style).
Every sample of an episode gets that episode's advantage.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from vibe_rl.errors import ConfigError
from vibe_rl.rl.samples import Sample


@dataclass
class Advantages:
    values: list[float]  # one per episode, in input order
    num_groups: int = 0
    num_all_equal_groups: int = 0
    group_means: dict[str, float] = field(default_factory=dict)
    group_stds: dict[str, float] = field(default_factory=dict)

    def metrics(self) -> dict[str, float]:
        return {"groups": float(self.num_groups), "all_equal_groups": float(self.num_all_equal_groups)}


def all_equal(rewards: Sequence[float]) -> bool:
    """True when a group's rewards carry no learning signal: every advantage would be 0.

    The one test for it: the pool's `non_dummy_tasks` policy and the advantages both use it.
    """
    return not rewards or max(rewards) - min(rewards) <= 1e-12


def grpo_advantages(task_ids: Sequence[str], rewards: Sequence[float], *, scale_by_std: bool = True,
                    eps: float = 1e-6) -> Advantages:
    """Episode rewards -> group-normalised advantages (episodes grouped by task_id)."""
    if len(task_ids) != len(rewards):
        raise ConfigError(f"{len(task_ids)} task ids but {len(rewards)} rewards; pass one of each per episode.")
    groups: dict[str, list[int]] = defaultdict(list)
    for i, (task, reward) in enumerate(zip(task_ids, rewards, strict=True)):
        if not math.isfinite(reward):
            raise ConfigError(f"Episode {i} (task {task!r}) has a non-finite reward {reward!r}; rewards must be finite.")
        groups[str(task)].append(i)
    out = Advantages(values=[0.0] * len(rewards), num_groups=len(groups))
    for task, members in groups.items():
        rs = [float(rewards[i]) for i in members]
        mean = sum(rs) / len(rs)
        std = math.sqrt(sum((r - mean) ** 2 for r in rs) / len(rs))
        out.group_means[task], out.group_stds[task] = mean, std
        if all_equal(rs):  # no signal: exactly zero
            out.num_all_equal_groups += 1
            continue
        for i, r in zip(members, rs, strict=True):
            out.values[i] = (r - mean) / (std + eps) if scale_by_std else r - mean
    return out


def assign_advantages(samples: Sequence[Sample], episode_rewards: Mapping[str, float], *,
                      scale_by_std: bool = True) -> Advantages:
    """Set `sample.advantage` from per-episode rewards; episodes are grouped by their samples' task_id.

    Returns the per-episode Advantages (values in the order of `episode_rewards`).
    """
    task_of: dict[str, str] = {}
    for s in samples:
        if s.episode_id not in episode_rewards:
            raise ConfigError(f"Sample of episode {s.episode_id!r} has no reward; pass every episode's reward.")
        task_of.setdefault(s.episode_id, s.task_id)
    episodes = list(episode_rewards)
    adv = grpo_advantages([task_of.get(e, e) for e in episodes], [episode_rewards[e] for e in episodes],
                          scale_by_std=scale_by_std)
    by_episode = dict(zip(episodes, adv.values, strict=True))
    for s in samples:
        s.advantage = by_episode[s.episode_id]
    return adv
