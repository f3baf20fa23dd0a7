"""The live state of a `vibe-rl run`, in `DIR/logs/run-state.json`: what `vibe-rl status` reads.

The runner rewrites it (atomically) at each phase and poll: its pid, the phase, each server's URL,
session, start step (a resumed checkpoint) and target, the step and episodes seen last, and in the end
the outcome. A state whose outcome is still "running" but whose pid is gone means the run was killed.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

STATE_FILE = Path("logs") / "run-state.json"
RUN_LOG = Path("logs") / "run.log"  # where a detached run writes its output


@dataclass
class ServerProgress:
    url: str
    session: str
    start_step: int = 0  # the checkpoint the server resumed (0: from scratch)
    target_step: int = 1
    step: int = 0
    episodes: int = 0  # completed episodes in the pool
    aborted: int = 0
    signal_step: int | None = None  # first update of this run with a non-zero gradient

    @property
    def new_updates(self) -> int:
        return max(0, self.step - self.start_step)


@dataclass
class RunState:
    project: str
    pid: int
    mode: str = ""
    until: str = "first-step"
    phase: str = "starting"  # venvs | servers | client | training | done
    outcome: str = "running"  # running | success | failed | stopped
    started: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)
    servers: dict[str, ServerProgress] = field(default_factory=dict)
    sessions: list[str] = field(default_factory=list)
    last_line: str = ""  # the run's latest output line
    log: str | None = None  # the detached run's output file

    def save(self, project_dir: Path) -> None:
        self.updated = time.time()
        path = Path(project_dir) / STATE_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        os.replace(tmp, path)

    @classmethod
    def load(cls, project_dir: Path) -> RunState | None:
        try:
            data: dict[str, Any] = json.loads((Path(project_dir) / STATE_FILE).read_text())
        except (OSError, ValueError):
            return None
        servers = {k: ServerProgress(**v) for k, v in (data.pop("servers", None) or {}).items()}
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known, servers=servers)

    def active(self) -> bool:
        """True while the process that writes this state is alive and has not finished."""
        return self.outcome == "running" and pid_alive(self.pid)

    def progress(self) -> str:
        """One line: phase, per-server step against its target, episodes, elapsed time."""
        parts = []
        for name, s in self.servers.items():
            resumed = f", resumed at {s.start_step}" if s.start_step else ""
            parts.append(f"{name} step {s.step} (this run: {s.new_updates} of {s.target_step - s.start_step} "
                         f"update(s){resumed}; {s.episodes} episodes pooled, {s.aborted} aborted)")
        elapsed = time.time() - self.started
        return (f"[vibe-rl] {self.outcome} ({self.phase}, {elapsed:.0f} s, --until {self.until}): "
                + ("; ".join(parts) if parts else "no server started yet"))


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (exited, not yet reaped by its parent) is not alive
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True
