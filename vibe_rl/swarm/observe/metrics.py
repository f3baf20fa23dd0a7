"""What one weight update reports about its episodes (rewards, roles, tokens), with integer counts.

`batch_metrics(groups)` is merged into the update's metrics next to the engine's own (loss, KL,
clip fraction, grad norm); `engine_metrics` renames the engine's internal counters so that
`step` always means the server's `global_step`, an int.
"""

from __future__ import annotations

import math
from collections import deque
from typing import TYPE_CHECKING, Any

from vibe_rl.rl.samples import retokenized_turns

if TYPE_CHECKING:  # the groups an update trains: read, never built here
    from vibe_rl.swarm.server.pool import CompletedEpisode

# engine keys that are counts (ints on the wire), and engine keys renamed so `step` stays the global step
COUNT_KEYS = ("num_samples", "num_loss_tokens", "zero_advantage_samples", "truncated_samples",
              "truncated_loss_tokens", "dropped_samples", "nan_skipped", "nan_skipped_total")
RENAMED = {"step": "engine_step", "version": "weight_version"}
MAX_ROLES = 32  # per-role reward metrics of one update (the roles with the most episodes); the rest are counted


def _stats(values: list[float]) -> dict[str, float]:
    if not values:
        return {"mean": 0.0, "std": 0.0, "min": 0.0, "max": 0.0}
    mean = math.fsum(values) / len(values)
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))
    return {"mean": round(mean, 6), "std": round(std, 6), "min": min(values), "max": max(values)}


def role_of(player: str | None) -> str | None:
    """'civilian:player_3' -> 'civilian'; an untagged call has no role."""
    if not player:
        return None
    return player.split(":", 1)[0].strip() or None


def batch_metrics(groups: list[list[CompletedEpisode]]) -> dict[str, Any]:
    """Reward statistics (overall and per trainable role), counts and generated tokens of the groups."""
    episodes = [ep for group in groups for ep in group]
    rewards = [ep.reward for ep in episodes]
    out: dict[str, Any] = {f"reward_{k}": v for k, v in _stats(rewards).items()}
    by_role: dict[str, list[float]] = {}
    tokens = turns = 0
    for ep in episodes:
        roles = set()
        for turn in ep.turns:
            if turn.static:
                continue
            turns += turn.trainable  # context_only calls are generated (tokens) but never trained
            tokens += len(turn.response_ids)
            role = role_of(turn.player)
            if role:
                roles.add(role)
        for role in roles:  # an episode's reward counts once for each trainable role that played in it
            by_role.setdefault(role, []).append(ep.reward)
    # A client may put anything in `user` (OpenAI's own meaning is an end-user id): keep the metrics bounded,
    # and a role named like a statistic ('mean', 'max', ...) must not overwrite reward_mean / reward_max.
    top = sorted(sorted(by_role.items()), key=lambda kv: -len(kv[1]))[:MAX_ROLES]
    for role, values in sorted(top):
        out[f"reward_role_{role}" if f"reward_{role}" in out else f"reward_{role}"] = _stats(values)["mean"]
    if len(by_role) > MAX_ROLES:
        out["roles_not_reported"] = len(by_role) - MAX_ROLES
    retokenized = sum(retokenized_turns([t for t in ep.turns if t.trainable]) for ep in episodes)
    out.update(episodes=len(episodes), tasks=len(groups), trainable_turns=turns, tokens=tokens,
               retokenized_turns=retokenized)
    return out


def engine_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    """The engine's step metrics with integer counts and no key that shadows the global step."""
    out = dict(metrics)
    for old, new in RENAMED.items():
        if old in out:
            out[new] = int(out.pop(old))
    for key in COUNT_KEYS:
        if isinstance(out.get(key), float) and math.isfinite(out[key]):
            out[key] = int(out[key])
    return out


class Rates:
    """Rates of a server's cumulative counters over a sliding window."""

    def __init__(self, window: float = 30.0):
        self.window = window
        self.samples: deque[tuple[float, dict[str, int]]] = deque()

    def add(self, now: float, counters: dict[str, int]) -> dict[str, float]:
        self.samples.append((now, dict(counters)))
        while len(self.samples) > 2 and now - self.samples[1][0] >= self.window:
            self.samples.popleft()
        t0, first = self.samples[0]
        span = now - t0
        if span <= 0:
            return {}
        return {k: max(0, v - first.get(k, 0)) / span for k, v in counters.items()}
