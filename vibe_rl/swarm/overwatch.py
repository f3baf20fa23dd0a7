"""`vibe-rl swarm overwatch`: a rich live view of one swarm server's /control/status.

The reference tutorial's bug, many episodes piled under one empty or repeated
task_id (so the pool never reaches `batch_size` tasks and training never
starts), shows as a red WARNING row and red task rows.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

PILE_UP_FACTOR = 2.0  # a group this many times larger than grpo_n is suspicious


def _bar(current: float, target: float, width: int = 30) -> str:
    if target <= 0:
        return "-"
    filled = min(width, int(width * current / target))
    return "█" * filled + "░" * (width - filled)


def pile_ups(status: dict[str, Any]) -> list[dict[str, Any]]:
    grpo_n = max(1, status["pool"].get("grpo_n") or 1)
    return [t for t in status.get("tasks", []) if t["episodes"] > PILE_UP_FACTOR * grpo_n]


def render(status: dict[str, Any], url: str = "") -> Group:
    pool = status["pool"]
    grpo_n = pool.get("grpo_n") or 0
    head = Text.assemble(("state ", "bold"), (status["state"], "bold green" if status["state"] == "ROLLING" else "bold yellow"),
                         ("   global step ", "bold"), str(status["global_step"]),
                         ("   weight version ", "bold"), str(status.get("weight_version", 0)),
                         ("   model ", "bold"), str(status.get("model") or "-"), ("   " + url, "dim"))
    parts: list[Any] = [head]
    devices = status.get("devices") or []
    if devices:
        gpus = [d["gpu"] for d in devices if d.get("gpu") is not None]
        where = f"{len(gpus)} GPU(s) [{', '.join(gpus)}]" if gpus else ", ".join(str(d.get("device")) for d in devices)
        hosts = len({d.get("host") for d in devices if d.get("host")})
        parts.append(Text(f"devices: {len(devices)} process(es), {where}" + (f" on {hosts} nodes" if hosts > 1 else ""),
                          style="dim"))
    upd = status.get("last_update")
    if upd:
        keys = ("loss", "reward_mean", "episodes", "samples", "update_s")
        parts.append(Text("last update: step " + str(upd.get("step")) + "  " +
                          "  ".join(f"{k}={upd[k]:.4g}" if isinstance(upd[k], float) else f"{k}={upd[k]}"
                                    for k in keys if k in upd), style="cyan"))

    table = Table(title="Completed episode pool (progress to the next weight update)", expand=False)
    for col, just in (("Metric", "left"), ("Current", "right"), ("Target", "right"), ("Progress", "right"),
                      ("Bar", "left")):
        table.add_column(col, justify=just)
    policy = pool.get("policy")
    rows = [("Completed episodes", pool["completed_episodes"], pool["target_episodes"], "episodes"),
            ("Completed tasks", pool["completed_tasks"], pool["target_tasks"], "tasks"),
            ("Completed non-dummy tasks", pool["completed_non_dummy_tasks"], pool["target_tasks"], "non_dummy_tasks")]
    for name, cur, target, key in rows:
        chosen = key == policy
        label = f"-> {name} (chosen)" if chosen else name
        pct = f"{100 * cur / target:.1f}%" if target else "-"
        table.add_row(Text(label, style="bold" if chosen else ""), str(cur), str(target), pct, _bar(cur, target))
    avg = pool.get("avg_episodes_per_task", 0.0)
    piled = grpo_n and avg > PILE_UP_FACTOR * grpo_n
    table.add_row("Average episodes per task", f"{avg:.2f}", str(grpo_n), "-", "-", style="bold red" if piled else "")
    table.add_row("Discarded (idle) / aborted episodes", f"{pool.get('discarded_episodes', 0)} / "
                  f"{pool.get('aborted_episodes', 0)}", "-", "-", "-")
    ttl = pool.get("incomplete_group_ttl_s") or 0
    old_group = ttl and pool.get("oldest_incomplete_idle_s", 0) > ttl / 2
    table.add_row("Incomplete tasks (oldest idle s) / expired episodes",
                  f"{pool.get('incomplete_tasks', 0)} ({pool.get('oldest_incomplete_idle_s', 0):.0f}) / "
                  f"{pool.get('expired_episodes', 0)}", f"ttl {ttl:g}" if ttl else "-", "-", "-",
                  style="yellow" if old_group else "")
    piles = pile_ups(status)
    for task in piles[:3]:
        table.add_row(Text(f"WARNING: pile-up under task_id {task['task_id']!r}", style="bold white on red"),
                      str(task["episodes"]), str(grpo_n), f"{100 * task['episodes'] / max(grpo_n, 1):.0f}%",
                      Text("episodes per task far above grpo_n", style="bold red"))
    parts.append(table)
    if piles:
        parts.append(Panel(f"{piles[0]['episodes']} episodes piled under task_id {piles[0]['task_id']!r} "
                           f"(grpo_n={grpo_n}). GRPO groups episodes by task_id, so the pool counts them as one "
                           "task and never reaches its target: give every task its own stable, non-empty "
                           "task_id (e.g. the episode seed).", title="WARNING", style="bold red"))

    running = status.get("running_episodes", [])
    rtable = Table(title=f"Running episodes ({status.get('running_count', len(running))})")
    for col in ("Episode", "LLM calls", "Idle s"):
        rtable.add_column(col, justify="left" if col == "Episode" else "right")
    for ep in running[:10]:
        rtable.add_row(ep["episode_uuid"][:12] + "...", str(ep["llm_calls"]), f"{ep['idle_s']:.1f}")
    parts.append(rtable)

    ttable = Table(title="Tasks in the pool (largest groups first)")
    for col in ("Task ID", "Episodes", "Reward"):
        ttable.add_column(col, justify="left" if col == "Task ID" else "right")
    for task in status.get("tasks", [])[:15]:
        bad = grpo_n and task["episodes"] > PILE_UP_FACTOR * grpo_n or not str(task["task_id"]).strip()
        ttable.add_row(repr(task["task_id"]) if not str(task["task_id"]).strip() else str(task["task_id"]),
                       str(task["episodes"]), f"{task['reward_mean']:.3f} ± {task['reward_std']:.3f}",
                       style="bold red" if bad else "")
    parts.append(ttable)
    for err in status.get("errors", [])[-3:]:
        parts.append(Text("error: " + err, style="red"))
    return Group(*parts)


def fetch(url: str) -> dict[str, Any]:
    from vibe_rl.swarm.auth import client_token

    token = client_token(url)  # the admin token: $VIBE_RL_SWARM_TOKEN(_FILE) or the one registered for the port
    resp = httpx.get(url.rstrip("/") + "/control/status", timeout=10.0,
                     headers={"Authorization": f"Bearer {token}"} if token else {})
    resp.raise_for_status()
    return resp.json()


def run(url: str, once: bool = False, interval: float = 2.0, console: Console | None = None) -> int:
    console = console or Console()
    if once:
        try:
            console.print(render(fetch(url), url))
        except httpx.HTTPError as exc:
            console.print(f"[red]cannot read {url}/control/status: {type(exc).__name__}: {exc}[/red]")
            return 1
        return 0
    from rich.live import Live

    def view() -> Any:
        try:
            return render(fetch(url), url)
        except httpx.HTTPError as exc:
            return Panel(f"cannot read {url}/control/status: {type(exc).__name__}: {exc}", style="red")

    try:
        if not console.is_terminal:  # piped or logged: one snapshot per interval instead of a live region
            while True:
                console.print(view())
                console.file.flush()
                time.sleep(interval)
        with Live(console=console, refresh_per_second=4, screen=False) as live:
            while True:
                live.update(view())
                time.sleep(interval)
    except KeyboardInterrupt:
        return 0
