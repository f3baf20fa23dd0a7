"""The watcher: reads the servers' status and traces over HTTP and the sessions' logs, and
turns what it sees into either progress, success (global_step reached) or a Diagnosis.

Success is only ever the status endpoint's `global_step`, never a line of log text.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from vibe_rl.autopilot.audit import AuditResult, Expected, audit_traces
from vibe_rl.autopilot.diagnose import Diagnosis, diagnose_status, diagnose_text, exit_code, nan_update
from vibe_rl.autopilot.sessions import SessionSpec, TmuxSessions
from vibe_rl.swarm.auth import client_token


@dataclass
class ServerView:
    """One swarm server as the watcher sees it."""

    name: str
    url: str
    session: SessionSpec
    token_file: Path | None = None  # the server's admin token (read on every call: a restart may change it)


@dataclass
class Snapshot:
    statuses: dict[str, dict[str, Any]] = field(default_factory=dict)  # server name -> last status
    diagnosis: Diagnosis | None = None
    reached: bool = False

    def min_step(self) -> int:
        return min((int(s.get("global_step") or 0) for s in self.statuses.values()), default=0)

    def episodes(self) -> int:
        return sum(int((s.get("pool") or {}).get("completed_episodes") or 0) for s in self.statuses.values())


def _admin(server: ServerView) -> dict[str, str]:
    token = client_token(server.url, token_file=server.token_file)
    return {"Authorization": f"Bearer {token}"} if token else {}


class Watcher:
    def __init__(self, sessions: TmuxSessions, servers: list[ServerView], client: SessionSpec, project_dir: Path,
                 expected: dict[str, Expected], http_timeout: float = 5.0):
        self.sessions, self.servers, self.client = sessions, servers, client
        self.project_dir, self.expected = Path(project_dir), expected
        self._http = httpx.Client(timeout=http_timeout, trust_env=False)

    def close(self) -> None:
        self._http.close()

    # -- HTTP --------------------------------------------------------------------------------
    def healthy(self, server: ServerView) -> bool:
        try:
            return self._http.get(f"{server.url}/healthz").status_code == 200
        except httpx.HTTPError:
            return False

    def status(self, server: ServerView) -> dict[str, Any] | None:
        try:
            r = self._http.get(f"{server.url}/control/status", headers=_admin(server))
            return r.json() if r.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None

    def traces(self, server: ServerView, since: float = 0.0, limit: int = 5000) -> list[dict[str, Any]]:
        try:
            r = self._http.get(f"{server.url}/control/traces", params={"limit": limit}, headers=_admin(server))
            calls = r.json().get("calls", []) if r.status_code == 200 else []
        except (httpx.HTTPError, ValueError):
            return []
        return [c for c in calls if not isinstance(c.get("ts"), (int, float)) or c["ts"] >= since]

    # -- logs --------------------------------------------------------------------------------
    def log_failure(self, spec: SessionSpec, role: str) -> Diagnosis | None:
        """A failure written in a session's output since its latest start (or its exit)."""
        text = self.sessions.read_log(spec) or self.sessions.capture(spec.name)
        found = diagnose_text(text, spec.name, self.project_dir)
        if found is not None:
            return found
        code = exit_code(text)
        if code is not None or (not self.sessions.exists(spec.name)):
            tail = "\n".join(text.strip().splitlines()[-30:])
            kind = "client_died" if role == "client" else "server_died"
            return Diagnosis(kind, f"the {role} process exited (status {code})", spec.name, excerpt=tail,
                             suggestion="Read the output above; the process stopped before training started.")
        return None

    # -- phases ------------------------------------------------------------------------------
    def wait_ready(self, timeout: float, poll: float = 0.5) -> Diagnosis | None:
        """Wait until every server answers /healthz; a failure in their logs ends the wait early."""
        deadline = time.monotonic() + timeout
        pending = list(self.servers)
        while pending:
            pending = [s for s in pending if not self.healthy(s)]
            for s in pending:
                failure = self.log_failure(s.session, "server")
                if failure is not None:
                    return failure
            if not pending:
                return None
            if time.monotonic() > deadline:
                s = pending[0]
                tail = "\n".join(self.sessions.read_log(s.session).strip().splitlines()[-30:])
                return Diagnosis("server_not_ready", f"{s.url}/healthz did not answer within {timeout:.0f} s",
                                 s.session.name, excerpt=tail)
            time.sleep(poll)
        return None

    def poll(self, targets: dict[str, int] | None) -> Snapshot:
        """One look at everything: statuses, then the logs, then the pool's shape. `targets`: server -> the
        global step that ends the run (None: keep looking for failures whatever the step)."""
        snap = Snapshot()
        for s in self.servers:
            st = self.status(s)
            if st is not None:
                snap.statuses[s.name] = st
        sessions = {s.name: s.session.name for s in self.servers}
        for name, st in snap.statuses.items():  # a NaN step is not a success
            snap.diagnosis = nan_update(st, sessions[name])
            if snap.diagnosis:
                return snap
        if targets is not None and len(snap.statuses) == len(self.servers) and all(
                int(st.get("global_step") or 0) >= targets.get(name, 1) for name, st in snap.statuses.items()):
            snap.reached = True
            return snap
        for s in self.servers:
            snap.diagnosis = self.log_failure(s.session, "server")
            if snap.diagnosis:
                return snap
        snap.diagnosis = self.log_failure(self.client, "client")
        if snap.diagnosis:
            return snap
        for name, st in snap.statuses.items():
            snap.diagnosis = diagnose_status(st, sessions[name])
            if snap.diagnosis:
                return snap
        return snap

    def audit(self, since: float) -> AuditResult:
        calls = {s.name: self.traces(s, since) for s in self.servers}
        return audit_traces(calls, self.expected)


def audit_diagnosis(result: AuditResult, source: str) -> Diagnosis:
    return Diagnosis("trace_mismatch", f"{len(result.players)} player(s) called the wrong model: "
                     + ", ".join(result.players), source, excerpt=result.render(), players=list(result.players))
