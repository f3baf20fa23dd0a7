"""Start, wait for and stop a swarm server process: the loop every test, benchmark and `vibe-rl play` needs.

The caller builds the command (`vibe-rl swarm start --port PORT ...`: its settings differ per caller);
this module picks a free port, starts the command with its output in a log file, waits until the
server answers `GET /healthz`, and stops it:

    port = free_port()
    proc = spawn([..., "swarm", "start", "--port", str(port), ...], log_path)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc, timeout=120.0, log_path=log_path)
        ...
    finally:
        stop(proc)

`wait_healthy` never touches the process: on failure it raises `ServerNotReadyError` (with the tail of
the server's log) and the caller decides whether to kill it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx

from vibe_rl.engine.distributed import free_port
from vibe_rl.errors import SwarmError

__all__ = ["ServerNotReadyError", "free_port", "log_tail", "spawn", "stop", "wait_healthy"]

Procs = subprocess.Popen | Sequence[subprocess.Popen] | None


class ServerNotReadyError(SwarmError):
    """A server process exited, or did not answer /healthz in time; `log_tail` is the end of its log."""

    def __init__(self, message: str, url: str, returncode: int | None, log_tail: str):
        super().__init__(message)
        self.url, self.returncode, self.log_tail = url, returncode, log_tail


def _as_list(procs: Procs) -> list[subprocess.Popen]:
    if procs is None:
        return []
    return [procs] if isinstance(procs, subprocess.Popen) else list(procs)


def spawn(cmd: Sequence[str], log_path: Path | str, *, cwd: Path | str | None = None,
          env: Mapping[str, str] | None = None, append: bool = False, new_session: bool = False) -> subprocess.Popen:
    """Start `cmd` with stdout and stderr in `log_path` (a file, never a pipe: a full pipe would block the
    server's logging), stdin closed and PYTHONUNBUFFERED=1 so the log is current. `env` replaces this
    process's environment; `append` keeps what the log holds (a restart on the same log); `new_session`
    gives the process its own process group (stop it with `stop(proc, group=True)`)."""
    with open(log_path, "ab" if append else "wb") as log:  # the child keeps its own descriptor
        return subprocess.Popen(list(cmd), cwd=cwd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env={**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"},
                                start_new_session=new_session)


def log_tail(log_path: Path | str | None, chars: int = 3000) -> str:
    """The last `chars` characters of a log file ("" when there is none yet)."""
    if log_path is None or not Path(log_path).exists():
        return ""
    return Path(log_path).read_text(errors="replace")[-chars:]


def _healthy(url: str, request_timeout: float) -> bool:
    try:  # a server we started on this host: no proxy from the environment in between
        return httpx.get(f"{url}/healthz", timeout=request_timeout, trust_env=False).status_code == 200
    except httpx.HTTPError:
        return False


def wait_healthy(url: str, proc: Procs = None, timeout: float = 120.0, log_path: Path | str | None = None, *,
                 interval: float = 0.2, request_timeout: float = 2.0, tail_chars: int = 3000) -> None:
    """Return once `GET {url}/healthz` answers 200. Raise `ServerNotReadyError` as soon as `proc` (one
    process or several, e.g. the launchers of a multi-node server) has exited, or once `timeout` seconds
    have passed; the message carries the last `tail_chars` characters of `log_path`. The server is asked
    at least once, even with a timeout of 0 or less. The process is left as it is."""
    procs, deadline = _as_list(proc), time.monotonic() + timeout
    while not _healthy(url, request_timeout):
        exited = next((p for p in procs if p.poll() is not None), None)
        if exited is None and time.monotonic() <= deadline:
            time.sleep(interval)
            continue
        tail = log_tail(log_path, tail_chars)
        where = f"Last output ({log_path}):\n{tail or '(empty)'}\n" if log_path is not None else ""
        if exited is not None:
            code = exited.returncode
            raise ServerNotReadyError(
                f"The server for {url} exited (status {code}) before answering /healthz. {where}"
                "Fix what its output names (e.g. a port in use, a bad --set value, a missing extra) and start it "
                "again.", url, code, tail)
        raise ServerNotReadyError(
            f"The server for {url} did not answer /healthz within {round(timeout, 1):g} s. {where}"
            "If it is still loading its model, allow a longer timeout; otherwise fix what its output names and "
            "start it again.", url, None, tail)


def _signal(proc: subprocess.Popen, sig: int, group: bool) -> None:
    if not group:
        proc.send_signal(sig)
        return
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:  # the whole group is gone already
        pass


def stop(proc: Procs, grace: float = 30.0, *, group: bool = False, kill_wait: float | None = 10.0) -> None:
    """Terminate every running process of `proc` (all first, so they shut down in parallel), wait up to
    `grace` seconds for each, then kill the ones still running and wait `kill_wait` seconds (None: as long
    as it takes). `group`: signal each process's whole process group (started with start_new_session=True)."""
    running = [p for p in _as_list(proc) if p.poll() is None]
    for p in running:
        _signal(p, signal.SIGTERM, group)
    for p in running:
        try:
            p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            _signal(p, signal.SIGKILL, group)
            p.wait(timeout=kill_wait)
