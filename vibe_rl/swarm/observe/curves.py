"""Reward and loss curves of an experiment directory (`vibe-rl swarm plot`, the end of `vibe-rl run`).

Updates are read from `metrics.jsonl` (the jsonl logger) or, when an older run has none, from the
`updates` table of `swarm.sqlite`. Drawing needs matplotlib (the `plot` extra), imported lazily.
"""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path
from typing import Any

from vibe_rl.errors import ConfigError
from vibe_rl.extras import require
from vibe_rl.swarm.observe.loggers import METRICS_FILE, read_jsonl


def load_updates(exp_dir: str | Path) -> list[dict[str, Any]]:
    """Every logged update of the experiment, by step (int)."""
    root = Path(exp_dir)
    rows = read_jsonl(root)
    if rows:
        return rows
    db = root / "swarm.sqlite"
    if db.is_file():
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            found = con.execute("SELECT step, metrics_json, ts FROM updates ORDER BY step").fetchall()
        except sqlite3.DatabaseError:
            found = []
        finally:
            con.close()
        return [{**json.loads(m), "step": int(s), "ts": ts} for s, m, ts in found]
    if not root.is_dir():
        raise ConfigError(f"{root} is not a directory: pass an experiment dir (e.g. PROJECT/experiments/server1).")
    return []


def _num(row: dict[str, Any], key: str) -> float:
    value = row.get(key)
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else float("nan")


def table(updates: list[dict[str, Any]]) -> str:
    """One line per update: step, reward mean +- std, loss, episodes, seconds per step."""
    lines = ["step  reward (mean +- std)   loss       episodes  s/step"]
    for row in updates:
        lines.append(f"{row['step']:>4}  {_num(row, 'reward_mean'):8.4f} +- {_num(row, 'reward_std'):<8.4f}  "
                     f"{_num(row, 'loss'):<9.4g}  {int(row.get('episodes', 0)):>8}  "
                     f"{_num(row, 'seconds_per_step'):6.1f}")
    return "\n".join(lines)


def learning(updates: list[dict[str, Any]], k: int = 3) -> dict[str, Any] | None:
    """Mean reward of the first k and last k updates and the margin (None with fewer than 2k updates)."""
    rewards = [_num(row, "reward_mean") for row in updates]
    if len(rewards) < 2 * k:
        return None
    first, last = sum(rewards[:k]) / k, sum(rewards[-k:]) / k
    return {"updates": len(rewards), "first_mean": round(first, 4), "last_mean": round(last, 4),
            "margin": round(last - first, 4), "rose": last > first}


def eval_points(updates: list[dict[str, Any]]) -> list[tuple[int, float]]:
    """(step, held-out eval reward): eval episodes (never trained on) that ended before update k are logged with
    it, so they were served by the weights of step k-1."""
    return [(row["step"] - 1, _num(row, "eval/reward_mean")) for row in updates if "eval/reward_mean" in row]


def eval_win_points(updates: list[dict[str, Any]]) -> list[tuple[int, float, float, float, int]]:
    """(step, eval win rate, its 95% Wilson interval's lo and hi, episodes) of the updates that logged one (see
    `winrate`), placed at the weights that served them like `eval_points`."""
    return [(row["step"] - 1, _num(row, "eval/win_rate"), _num(row, "eval/win_rate_lo"), _num(row, "eval/win_rate_hi"),
             int(row.get("eval/win_episodes") or 0)) for row in updates if "eval/win_rate" in row]


def eval_table(updates: list[dict[str, Any]]) -> str:
    """One line per update with an eval win rate: the weights' step, the rate, its 95% interval, episodes; '' when
    no update logged one."""
    points = eval_win_points(updates)
    if not points:
        return ""
    lines = ["weights of step  eval win rate  95% interval (Wilson)  eval episodes"]
    lines += [f"{step:>15}  {rate:13.3f}  [{lo:.3f}, {hi:.3f}]{'':>8}  {n:>13}" for step, rate, lo, hi, n in points]
    return "\n".join(lines)


def draw(updates: list[dict[str, Any]], out: str | Path, title: str = "") -> Path:
    """reward mean +- std and the held-out eval reward where logged (top), the eval win rate with its 95% interval
    where logged (middle, only then), loss (bottom) per step, written to `out` (PNG, SVG or PDF)."""
    if not updates:
        raise ConfigError(f"No updates to plot: the experiment has no {METRICS_FILE} rows and no recorded updates "
                          "yet (wait for the first weight update).")
    matplotlib = require("matplotlib", "vibe-rl swarm plot")
    matplotlib.use("Agg")
    plt = require("matplotlib.pyplot", "vibe-rl swarm plot")
    steps = [row["step"] for row in updates]
    mean = [_num(row, "reward_mean") for row in updates]
    std = [0.0 if math.isnan(_num(row, "reward_std")) else _num(row, "reward_std") for row in updates]
    wins = eval_win_points(updates)
    fig, axes = plt.subplots(3 if wins else 2, 1, figsize=(7, 9 if wins else 6), sharex=True)
    top, bottom = axes[0], axes[-1]
    try:
        top.plot(steps, mean, marker="o", label="reward mean")
        low = [m - s for m, s in zip(mean, std, strict=True)]
        high = [m + s for m, s in zip(mean, std, strict=True)]
        top.fill_between(steps, low, high, alpha=0.2, label="+- std")
        evals = eval_points(updates)
        if evals:
            top.plot([x for x, _ in evals], [y for _, y in evals], marker="s", linestyle="--", color="tab:green",
                     label="held-out eval reward")
        top.set_ylabel("episode reward")
        top.legend(loc="best")
        top.set_title(title or "reward per weight update")
        if wins:
            middle = axes[1]
            x, rate = [p[0] for p in wins], [p[1] for p in wins]
            below = [r - p[2] for r, p in zip(rate, wins, strict=True)]
            above = [p[3] - r for r, p in zip(rate, wins, strict=True)]
            middle.errorbar(x, rate, yerr=[below, above], marker="s", capsize=3, color="tab:green",
                            label="eval win rate (95% Wilson interval)")
            middle.set_ylim(-0.02, 1.02)
            middle.set_ylabel("eval win rate")
            middle.legend(loc="best")
        bottom.plot(steps, [_num(row, "loss") for row in updates], marker=".", color="tab:red")
        bottom.set_ylabel("GRPO loss")
        bottom.set_xlabel("global step")
        fig.tight_layout()
        path = Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=100)
    finally:
        plt.close(fig)
    return path


def write_run_curves(project_dir: str | Path) -> list[str]:
    """After `vibe-rl run`: one PNG per server experiment next to the run's report (PROJECT/logs/curves_<server>.png).
    Returns the lines to print; a missing matplotlib is said, not raised."""
    from vibe_rl.errors import MissingExtraError

    root = Path(project_dir)
    lines = []
    for metrics in sorted(root.glob(f"experiments/*/{METRICS_FILE}")):
        updates = load_updates(metrics.parent)
        if not updates:
            continue
        try:
            path = draw(updates, root / "logs" / f"curves_{metrics.parent.name}.png", title=metrics.parent.name)
        except MissingExtraError as exc:
            return [f"[vibe-rl] no reward curves: {exc}"]
        summary = learning(updates)
        rose = (f"; first-3 mean {summary['first_mean']}, last-3 mean {summary['last_mean']}" if summary else "")
        lines.append(f"[vibe-rl] {metrics.parent.name}: {len(updates)} updates, reward "
                     f"{updates[0].get('reward_mean')} -> {updates[-1].get('reward_mean')}{rose}; curves: {path}")
    return lines
