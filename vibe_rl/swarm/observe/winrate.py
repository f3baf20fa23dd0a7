"""The eval win rate of a weight update, with a 95% Wilson score interval.

An eval episode (`eval=True`: held-out seeds, served by the current weights, never trained on) reports
its outcome in its end metadata under `win` (`WIN_KEY`): True when the trainable side won, False when it
lost or drew; an episode whose metadata has no bool `win` counts in `eval/episodes` and
`eval/reward_mean` but not in the win rate. The templates set it (Who-is-Spy: `winner == role`;
Werewolves: the side of the episode's trainable team won; turn_based: the learner's seat won; a draw is
not a win).

The interval is Wilson's score interval, not the normal (Wald) one: it stays inside [0, 1] and keeps
its coverage for the small eval rounds and the rates near 0 or 1 that games produce. With k wins in n
episodes, p = k / n and z = 1.96,

    centre = (p + z^2 / 2n) / (1 + z^2 / n)
    half   = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / 4n^2)

and the interval is [centre - half, centre + half]. Pure stdlib: the server, `swarm plot`, overwatch and
the run report all read the same keys.
"""

from __future__ import annotations

import math
from typing import Any

WIN_KEY = "win"  # the end metadata key an eval episode reports its outcome under (a bool)
Z95 = 1.959963984540054  # the standard normal's 97.5% quantile


def wilson(wins: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval (lo, hi) of a win rate of `wins` in `n` episodes (95% for the default z)."""
    if n <= 0:
        raise ValueError(f"a win-rate interval needs at least one episode, got n={n}")
    if not 0 <= wins <= n:
        raise ValueError(f"wins must lie in [0, n], got wins={wins}, n={n}")
    p, z2 = wins / n, z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    # exact at the ends (0 wins: lo is 0; all wins: hi is 1), where rounding would leave 1e-17 of the bound
    return (0.0 if wins == 0 else min(p, centre - half)), (1.0 if wins == n else max(p, centre + half))


def win_of(metadata: dict[str, Any] | None) -> bool | None:
    """The episode's reported outcome: metadata['win'] when it is a bool, else None (not counted)."""
    value = (metadata or {}).get(WIN_KEY)
    return value if isinstance(value, bool) else None


def eval_metrics(rewards: list[float], wins: list[bool | None]) -> dict[str, Any]:
    """The eval/* metrics of the eval episodes ended since the last update: episodes and reward mean, and, when
    some reported a win, the win rate with its 95% Wilson interval over those (`eval/win_episodes` of them)."""
    if not rewards:
        return {}
    out: dict[str, Any] = {"eval/episodes": len(rewards), "eval/reward_mean": sum(rewards) / len(rewards)}
    known = [w for w in wins if w is not None]
    if known:
        won = sum(known)
        lo, hi = wilson(won, len(known))
        out.update({"eval/wins": won, "eval/win_episodes": len(known), "eval/win_rate": round(won / len(known), 6),
                    "eval/win_rate_lo": round(lo, 6), "eval/win_rate_hi": round(hi, 6)})
    return out


def latest(updates: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The newest update that logged an eval win rate, or None."""
    return next((u for u in reversed(updates) if isinstance(u.get("eval/win_rate"), (int, float))), None)


def describe(update: dict[str, Any]) -> str:
    """'0.625 [0.306, 0.863] over 8 eval episodes (weights of step 4)' for an update with an eval win rate."""
    n = int(update.get("eval/win_episodes") or update.get("eval/episodes") or 0)
    return (f"{update['eval/win_rate']:.3f} [{update['eval/win_rate_lo']:.3f}, {update['eval/win_rate_hi']:.3f}] "
            f"over {n} eval episodes (weights of step {int(update.get('step') or 1) - 1})")
