"""GRPO advantages: each episode's reward normalised within its task group, or per-seat credit for games.

For the episodes of one task (one GRPO group) with rewards r_1..r_n:

    A_i = (r_i - mean(r)) / (std(r) + eps)      std is the population std (ddof=0)

A group whose rewards are all equal (including a group of one episode) carries
no learning signal: its advantages are exactly 0 and it is counted in
`num_all_equal_groups`, so a run that only ever sees such groups is visible.
With `scale_by_std=False` the advantage is just r_i - mean(r) (Dr. GRPO style).
Every sample of an episode gets that episode's advantage.

Per-seat credit for games (`train.advantage`; 'group', the default, is the above)
------------------------------------------------------------------------------
A player tag is `Turn.player` ('civilian:p1', the `user=` of the call); its role is the part
before the first ':' ('civilian'); an untagged call is the player '' of role ''. A seat (e, p) is
player p of episode e, for every p that holds a trainable turn of e (seats are grouped by role, not
by tag: games deal tags and roles anew each episode). Its reward r_{e,p} is

    team:        r_{e,p} = R_e                         R_e = the episode's reward
    individual:  r_{e,p} = seat_rewards[p]             the client's `metadata['seat_rewards']`, a map
                                                       player tag -> number sent with ep.end; a seat
                                                       missing from it gets R_e, counted in
                                                       `seat_rewards_missing`

and its advantage A_{e,p}, with mean/std the population ones and eps = 1e-6:

    'seat'           team reward;       S = the seats of task g and role k (over g's episodes):
                     A_{e,p} = (r_{e,p} - mean_S(r)) / (std_S(r) + eps)
    'individual'     as 'seat', with the individual reward
    'role_baseline'  individual reward; S = the seats of role k over the whole batch (all tasks):
                     A_{e,p} = (r_{e,p} - b_k) / (std_S(r) + eps),   b_k = mean_S(r)
    'zero_sum'       individual reward; c_{e,p} = r_{e,p} - mean_{p' of e}(r_{e,p'}), then over the
                     seats S of task g:  A_{e,p} = c_{e,p} / (std_S(c) + eps)
                     so the advantages of the seats of one game sum to zero (a game with one seat: 0)

A set S whose values are all equal gives exactly 0 and counts in `all_equal_groups`; `groups`
counts the sets S. With `scale_by_std=False` the division is left out. A sample gets the mean
advantage of the seats whose turns it holds (`Sample.players`; none: the seat '').
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vibe_rl.errors import ConfigError
from vibe_rl.rl.samples import Sample

SEAT_MODES = ("seat", "individual", "role_baseline", "zero_sum")  # train.advantage's values besides 'group'
INDIVIDUAL_MODES = ("individual", "role_baseline", "zero_sum")  # the modes that read seat_rewards
SEAT_REWARDS_KEY = "seat_rewards"  # the episode output metadata key of the individual rewards


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


def role_of(player: str) -> str:
    """'civilian:p1' -> 'civilian' (the same rule as the swarm metrics); '' for an untagged call."""
    return player.split(":", 1)[0].strip()


@dataclass
class Seat:
    """One player of one episode, with the reward the chosen mode credits it with."""

    episode: str
    task: str
    player: str
    reward: float


def seat_rewards_of(metadata: Mapping[str, Any] | None) -> dict[str, float]:
    """`metadata['seat_rewards']` checked: a map of player tag -> finite number (absent: {})."""
    raw = (metadata or {}).get(SEAT_REWARDS_KEY)
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"metadata[{SEAT_REWARDS_KEY!r}] is a {type(raw).__name__}; send a map of player tag "
                          "-> reward, e.g. {'civilian:p1': 1.0, 'spy:p2': -1.0}.")
    out: dict[str, float] = {}
    for player, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConfigError(f"metadata[{SEAT_REWARDS_KEY!r}][{player!r}] = {value!r}; every seat reward must "
                              "be a finite number.")
        out[str(player)] = float(value)
    return out


def episode_seats(samples: Sequence[Sample], episode_id: str, task_id: str, reward: float, mode: str,
                  seat_rewards: Mapping[str, float]) -> tuple[list[Seat], int]:
    """The seats of one episode (players in order of their first turn) -> (seats, seats without an
    individual reward). Team reward unless `mode` is one of INDIVIDUAL_MODES."""
    players: list[str] = []
    for s in samples:
        for p in s.players or [""]:
            if p not in players:
                players.append(p)
    individual = mode in INDIVIDUAL_MODES
    missing = sum(1 for p in players if individual and p not in seat_rewards)
    return [Seat(episode_id, task_id, p, seat_rewards.get(p, reward) if individual else reward)
            for p in players], missing


def _normalise(values: list[float], scale_by_std: bool, eps: float, mean: float | None = None) -> list[float] | None:
    """(v - mean) / (std + eps) per value, or None when all are equal (no signal). `mean` given: values whose
    mean is known to be that (zero_sum's centred values, exactly 0 in real numbers) keep it exactly."""
    if all_equal(values):
        return None
    mean = sum(values) / len(values) if mean is None else mean
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    return [(v - mean) / (std + eps) if scale_by_std else v - mean for v in values]


def seat_advantages(seats: Sequence[Seat], mode: str, *, scale_by_std: bool = True,
                    eps: float = 1e-6) -> Advantages:
    """Seat rewards -> per-seat advantages (values in the order of `seats`) by the module doc's equations."""
    if mode not in SEAT_MODES:
        raise ConfigError(f"Unknown per-seat advantage mode {mode!r}; use seat, individual, role_baseline or "
                          "zero_sum ('group' is grpo_advantages).")
    values = [s.reward for s in seats]
    if mode == "zero_sum":  # 1. centre within each game
        by_game: dict[str, list[int]] = defaultdict(list)
        for i, s in enumerate(seats):
            by_game[s.episode].append(i)
        for members in by_game.values():
            mean = sum(seats[i].reward for i in members) / len(members)
            for i in members:
                values[i] = seats[i].reward - mean
    sets: dict[Any, list[int]] = defaultdict(list)  # 2. the sets S of the mode
    for i, s in enumerate(seats):
        key = {"role_baseline": role_of(s.player), "zero_sum": s.task}.get(mode, (s.task, role_of(s.player)))
        sets[key].append(i)
    out = Advantages(values=[0.0] * len(seats), num_groups=len(sets))
    for members in sets.values():  # 3. normalise within each set
        normed = _normalise([values[i] for i in members], scale_by_std, eps, 0.0 if mode == "zero_sum" else None)
        if normed is None:
            out.num_all_equal_groups += 1
            continue
        for i, a in zip(members, normed, strict=True):
            out.values[i] = a
    return out


def assign_seat_advantages(samples: Sequence[Sample], seats: Sequence[Seat], adv: Advantages) -> None:
    """Set each sample's advantage to the mean advantage of the seats whose turns it holds."""
    by_seat = {(s.episode, s.player): a for s, a in zip(seats, adv.values, strict=True)}
    for sample in samples:
        held = [by_seat[(sample.episode_id, p)] for p in sample.players or [""]]
        sample.advantage = sum(held) / len(held)
