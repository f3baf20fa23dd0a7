"""`vibe-rl swarm overwatch`: a rich live view of one swarm server's /control/status.

The reference tutorial's bug, many episodes piled under one empty or repeated
task_id (so the pool never reaches `batch_size` tasks and training never
starts), shows as a red WARNING row and red task rows.

Above the tables: a reward sparkline over every update (`GET /control/updates`, read
incrementally), the eval win rate with its 95% interval where eval episodes report one,
throughput (episodes/s, generated tok/s over the last 30 s, s/step), and FINISHED once
`train.total_steps` is reached.
"""

from __future__ import annotations

import re
import time
from typing import Any

import httpx
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from vibe_rl.swarm.observe import winrate
from vibe_rl.swarm.observe.metrics import Rates

PILE_UP_FACTOR = 2.0  # a group this many times larger than grpo_n is suspicious
RUNNING_ROWS = 10  # running episodes listed; the rest are counted
SPARKS = "▁▂▃▄▅▆▇█"


# Control characters (terminal escapes: title, clipboard write, clear screen, hyperlinks) and bidi overrides; a
# task id or an error message comes from clients (and the status from whatever listens on the port).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
MAX_SHOWN = 300  # characters of one string shown at most


def clean(value: Any) -> Any:
    """`value` with every string made inert for a terminal: control characters written as escapes (`\\x1b`),
    long strings cut. Rich markup in them is never parsed: they are shown as Text, never as markup strings."""
    if isinstance(value, str):
        text = _CONTROL.sub(lambda m: repr(m.group())[1:-1], value)
        return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + f"... ({len(text)} chars)"
    if isinstance(value, dict):
        return {clean(k): clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean(v) for v in value]
    return value


def sparkline(values: list[float], width: int = 60) -> str:
    """One character per value (values averaged into `width` buckets when there are more)."""
    values = [v for v in values if v == v]
    if not values:
        return ""
    if len(values) > width:
        size = len(values) / width
        values = [sum(chunk) / len(chunk) for chunk in
                  (values[int(i * size):max(int((i + 1) * size), int(i * size) + 1)] for i in range(width))]
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    return "".join(SPARKS[min(len(SPARKS) - 1, int((v - lo) / span * (len(SPARKS) - 1) + 0.5))] for v in values)


def finished(status: dict[str, Any]) -> bool:
    total = status.get("total_steps") or 0
    return bool(total) and int(status.get("global_step") or 0) >= total


def _bar(current: float, target: float, width: int = 30) -> str:
    if target <= 0:
        return "-"
    filled = min(width, int(width * current / target))
    return "█" * filled + "░" * (width - filled)


def pile_ups(status: dict[str, Any]) -> list[dict[str, Any]]:
    grpo_n = max(1, status["pool"].get("grpo_n") or 1)
    return [t for t in status.get("tasks", []) if t["episodes"] > PILE_UP_FACTOR * grpo_n]


def render(status: dict[str, Any], url: str = "", history: list[dict[str, Any]] | None = None,
           rates: dict[str, float] | None = None) -> Group:
    """The view. `history`: every update so far (for the sparkline); `rates`: counters per second."""
    status, history, url = clean(status), clean(history), clean(url)
    pool = status["pool"]
    grpo_n = pool.get("grpo_n") or 0
    state = "FINISHED" if finished(status) else status["state"]
    color = {"ROLLING": "bold green", "FINISHED": "bold blue"}.get(state, "bold yellow")
    step = f"{status['global_step']}" + (f"/{status['total_steps']}" if status.get("total_steps") else "")
    head = Text.assemble(("state ", "bold"), (state, color),
                         ("   global step ", "bold"), step,
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
    if state == "FINISHED":
        parts.append(Text(f"FINISHED: train.total_steps={status['total_steps']} reached; no more weight updates "
                          "(completed episodes are still stored).", style="bold blue"))
    rewards = [float(u.get("reward_mean", float("nan"))) for u in history or []]
    if rewards:
        parts.append(Text.assemble(("reward ", "bold"), (sparkline(rewards), "green"),
                                   f"  {len(rewards)} updates, first {rewards[0]:.3f}, last {rewards[-1]:.3f}, "
                                   f"min {min(rewards):.3f}, max {max(rewards):.3f}"))
    evals = [u for u in history or [] if isinstance(u.get("eval/win_rate"), (int, float))]
    if evals:  # eval episodes (held-out seeds, never trained on) that reported metadata 'win'
        parts.append(Text.assemble(("eval win rate ", "bold"), (sparkline([u["eval/win_rate"] for u in evals]), "green"),
                                   f"  latest {winrate.describe(evals[-1])}; 95% Wilson interval"))
    upd = status.get("last_update")
    per_step = (upd or {}).get("seconds_per_step")
    pace = []
    if rates is not None:  # needs two looks at the counters (the live view; --once has one)
        pace += [f"{rates.get('episodes_ended', 0.0):.2f} episodes/s", f"{rates.get('llm_calls', 0.0):.1f} LLM calls/s",
                 f"{rates.get('generated_tokens', 0.0):.0f} generated tok/s"]
    if per_step:
        pace.append(f"{per_step:.1f} s/step")
    if upd and upd.get("tokens_per_s") is not None:
        pace.append(f"{upd['tokens_per_s']:.0f} tok/s over the last step")
    if pace:
        parts.append(Text("throughput: " + ", ".join(pace), style="magenta"))
    if upd:
        keys = ("loss", "reward_mean", "episodes", "num_samples", "update_s")
        parts.append(Text("last update: step " + str(upd.get("step")) + "  " +
                          "  ".join(f"{k}={upd[k]:.4g}" if isinstance(upd[k], float) else f"{k}={upd[k]}"
                                    for k in keys if k in upd), style="cyan"))

    table = Table(title="Completed episode pool (" + ("FINISHED: no more weight updates" if state == "FINISHED"
                                                      else "progress to the next weight update") + ")", expand=False)
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
        parts.append(Panel(Text(f"{piles[0]['episodes']} episodes piled under task_id {piles[0]['task_id']!r} "
                                f"(grpo_n={grpo_n}). GRPO groups episodes by task_id, so the pool counts them as one "
                                "task and never reaches its target: give every task its own stable, non-empty "
                                "task_id (e.g. the episode seed)."), title="WARNING", style="bold red"))

    running = status.get("running_episodes", [])
    rtable = Table(title=f"Running episodes ({status.get('running_count', len(running))})")
    for col in ("Episode", "LLM calls", "Idle s"):
        rtable.add_column(col, justify="left" if col == "Episode" else "right")
    for ep in running[:RUNNING_ROWS]:
        rtable.add_row(Text(str(ep["episode_uuid"])[:12] + "..."), str(ep["llm_calls"]), f"{ep['idle_s']:.1f}")
    hidden = status.get("running_count", len(running)) - min(len(running), RUNNING_ROWS)
    if hidden > 0:
        rtable.caption = f"{hidden} more running episodes not shown"
    parts.append(rtable)

    ttable = Table(title="Tasks in the pool (largest groups first)")
    for col in ("Task ID", "Episodes", "Reward"):
        ttable.add_column(col, justify="left" if col == "Task ID" else "right")
    for task in status.get("tasks", [])[:15]:
        bad = grpo_n and task["episodes"] > PILE_UP_FACTOR * grpo_n or not str(task["task_id"]).strip()
        ttable.add_row(Text(repr(task["task_id"]) if not str(task["task_id"]).strip() else str(task["task_id"])),
                       str(task["episodes"]), f"{task['reward_mean']:.3f} ± {task['reward_std']:.3f}",
                       style="bold red" if bad else "")
    parts.append(ttable)
    for err in status.get("errors", [])[-3:]:
        parts.append(Text("error: " + err, style="red"))
    return Group(*parts)


def fetch(url: str, path: str = "/control/status") -> dict[str, Any]:
    from vibe_rl.swarm.auth import client_token

    token = client_token(url)  # the admin token: $VIBE_RL_SWARM_TOKEN(_FILE) or the one registered for the port
    resp = httpx.get(url.rstrip("/") + path, timeout=10.0,
                     headers={"Authorization": f"Bearer {token}"} if token else {})
    resp.raise_for_status()
    return resp.json()


class View:
    """What the live view remembers between refreshes: every update seen, and counter samples for rates."""

    def __init__(self, url: str):
        self.url, self.history, self.rates = url, [], Rates()

    def __call__(self) -> Group:
        status = fetch(self.url)
        since = self.history[-1]["step"] if self.history else 0
        if int(status.get("global_step") or 0) < since:  # a restarted server: start the history over
            self.history, since = [], 0
        self.history += fetch(self.url, f"/control/updates?since={since}").get("updates", [])
        rates = self.rates.add(time.monotonic(), status.get("counters") or {})
        return render(status, self.url, self.history, rates if len(self.rates.samples) > 1 else None)


def run(url: str, once: bool = False, interval: float = 2.0, console: Console | None = None) -> int:
    console = console or Console()
    if once:
        try:
            console.print(View(url)())
        except httpx.HTTPError as exc:
            console.print(Text(clean(f"cannot read {url}/control/status: {type(exc).__name__}: {exc}"), style="red"))
            return 1
        return 0
    from rich.live import Live

    live_view = View(url)

    def view() -> Any:
        try:
            return live_view()
        except httpx.HTTPError as exc:
            return Panel(Text(clean(f"cannot read {url}/control/status: {type(exc).__name__}: {exc}")), style="red")

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
