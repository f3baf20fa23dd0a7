"""Fixtures that start real swarm servers (`vibe-rl swarm start` in a subprocess) on free loopback ports."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vibe_rl.swarm.launch import free_port, log_tail, spawn, stop, wait_healthy

ROOT = Path(__file__).resolve().parents[2]

# Small and fast: 2 tasks x 4 episodes per update, short answers, a big learning rate for the tiny model.
FAST = ["train.batch_size=2", "train.grpo_n=4", "train.lr=0.03", "train.micro_batch_size=8",
        "rollout.max_tokens=12", "model.max_model_len=512", "model.device=cpu"]


def admin(url: str) -> dict[str, str]:
    """Headers with the admin token of the server at `url` (found the way SwarmClient finds it)."""
    from vibe_rl.swarm.auth import client_token

    return {"authorization": f"Bearer {client_token(url)}"}


class Server:
    """One `vibe-rl swarm start` process; `url` is its root URL."""

    def __init__(self, exp_dir: Path, sets: list[str] = (), port: int | None = None, extra: list[str] = (),
                 env: dict[str, str] | None = None, model: str = "tiny"):
        self.exp_dir, self.sets, self.extra, self.env = Path(exp_dir), list(sets), list(extra), dict(env or {})
        self.model = model
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = self.exp_dir.parent / f"server-{self.port}.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> Server:
        cmd = [sys.executable, "-c", "from vibe_rl.cli import main; main()", "swarm", "start",
               "--port", str(self.port), "--model", self.model, "--experiment-dir", str(self.exp_dir), *self.extra]
        for s in self.sets:
            cmd += ["--set", s]
        self.exp_dir.parent.mkdir(parents=True, exist_ok=True)
        self.proc = spawn(cmd, self.log, cwd=ROOT, env={**os.environ, **self.env}, append=True)
        wait_healthy(self.url, self.proc, timeout=120.0, log_path=self.log, tail_chars=4000)
        return self

    def output(self) -> str:
        return log_tail(self.log, 4000)

    def kill(self) -> None:
        """SIGKILL: no cleanup at all, like a crashed machine."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        stop(self.proc)

    def wait_updates(self, swarm, n: int = 1) -> list:
        """The server's updates once there are at least `n`: the trainer runs them in the background, so an ended
        episode does not mean an update has begun. Fails at once if the server exits; a 10-minute guard against a
        hang, never a speed bound."""
        for _ in range(3000):
            updates = swarm.updates()
            if len(updates) >= n:
                return updates
            assert self.proc.poll() is None, f"the server exited before update {n}:\n{self.output()}"
            time.sleep(0.2)
        raise AssertionError(f"no update {n} after 10 minutes:\n{self.output()}")


@pytest.fixture
def make_server(tmp_path, tiny_model_dir):
    """Factory: make_server(name, sets=[...]) -> a started Server; all are stopped at teardown."""
    servers: list[Server] = []

    def make(name: str = "exp", sets: list[str] = (), **kw) -> Server:
        server = Server(tmp_path / name, [*FAST, *sets], **kw).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory, tiny_model_dir):
    """One started, ROLLING server shared by a module's tests (they must not depend on its step)."""
    from vibe_rl.swarm import SwarmClient, TrainJob

    server = Server(tmp_path_factory.mktemp("shared") / "exp", FAST).start()
    with SwarmClient(server.url) as client:
        client.auto_sync_train_config_and_start_engine(TrainJob(), verbose=False)
    yield server
    server.stop()
