"""The status line `vibe-rl run` prints while it waits for weight updates.

Per server: its state, the global step and the target, the completed episodes against what the next
update needs, LLM calls/s and generated tokens/s (from the server's cumulative `counters` over the
last `window` seconds), seconds per step, then the elapsed time and an estimate to the target.
On a terminal it is one line rewritten in place (about once a second); otherwise (a log, a pipe,
`--detach`) a plain line every `every` seconds.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from vibe_rl.swarm.observe.metrics import Rates


def clock(seconds: float | None) -> str:
    if seconds is None or seconds != seconds or seconds == float("inf"):
        return "?"
    seconds = int(max(0, seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def server_line(name: str, status: dict[str, Any], target: int, rates: dict[str, float]) -> tuple[str, float | None]:
    """(the server's part of the line, seconds it still needs to reach `target`, or None when unknown)."""
    pool = status.get("pool") or {}
    step = int(status.get("global_step") or 0)
    done, need = int(pool.get("completed_episodes") or 0), int(pool.get("target_episodes") or 0)
    last = status.get("last_update") or {}
    per_step = last.get("seconds_per_step")
    eps = rates.get("episodes_ended", 0.0)
    state = status.get("state", "?")
    if state == "OFFLINE" and not status.get("errors"):
        state = "OFFLINE (no job yet: the client starts it)"  # the servers are up before the client syncs its job
    parts = [f"{name} {state} step {step}/{target}", f"episodes {done}/{need}",
             f"{rates.get('llm_calls', 0.0):.1f} calls/s", f"{rates.get('generated_tokens', 0.0):.0f} tok/s"]
    if per_step:
        parts.append(f"{per_step:.1f} s/step")
    left = None
    if step >= target:
        left = 0.0
    elif eps > 0 and need:
        to_next = max(0, need - done) / eps
        more = target - step - 1
        left = to_next + more * (per_step if per_step else need / eps)
    return ", ".join(parts), left


class ProgressLine:
    def __init__(self, out: Callable[[str], None] = print, every: float = 10.0, stream: TextIO | None = None,
                 live: bool | None = None):
        self.out, self.every = out, every
        self.stream = stream or sys.stdout
        self.live = self.stream.isatty() if live is None else live
        self.rates: dict[str, Rates] = {}
        self._last: float | None = None  # the first line prints at once
        self._shown = False

    def render(self, statuses: dict[str, dict[str, Any]], targets: dict[str, int], elapsed: float,
               now: float | None = None) -> str:
        now = time.monotonic() if now is None else now
        parts, lefts = [], []
        for name, status in statuses.items():
            rates = self.rates.setdefault(name, Rates()).add(now, status.get("counters") or {})
            text, left = server_line(name, status, targets.get(name, 1), rates)
            parts.append(text)
            lefts.append(left)
        eta = None if not lefts or any(x is None for x in lefts) else max(lefts)
        return "[vibe-rl] " + " | ".join(parts) + f" | elapsed {clock(elapsed)}, to go ~{clock(eta)}"

    def show(self, statuses: dict[str, dict[str, Any]], targets: dict[str, int], elapsed: float) -> None:
        """Called on every poll; prints when it is time to."""
        if not statuses:
            return
        now = time.monotonic()
        line = self.render(statuses, targets, elapsed, now)
        if self.live:
            self.stream.write("\r\x1b[2K" + line[: 400])
            self.stream.flush()
            self._shown = True
        elif self._last is None or now - self._last >= self.every:
            self._last = now
            self.out(line)

    def clear(self) -> None:
        """Before any other output: wipe the live line (a plain line needs nothing)."""
        if self.live and self._shown:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self._shown = False
