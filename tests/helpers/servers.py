"""A real `vibe-rl swarm start` with the tiny model on loopback, for tests that drive a project against it."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from vibe_rl.swarm.launch import ServerNotReadyError, free_port, spawn, wait_healthy
from vibe_rl.swarm.launch import stop as stop_server  # noqa: F401  (used by the project tests)

VIBE_RL = str(Path(sys.executable).parent / "vibe-rl")


def start_server(tmp_path: Path, name: str, max_tokens: int, max_model_len: int, config: Path | None = None,
                 env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    """A tiny-model server (2 tasks x 2 episodes per update, CPU) -> (process, url); its log is tmp_path/NAME.log.
    `config` (the project's config.yaml) declares its static models, which a synced job may only name;
    `env` replaces the server's environment (default: this one)."""
    port = free_port()
    cmd = [VIBE_RL, "swarm", "start", "--port", str(port), "--model", "tiny", "--experiment-dir",
           str(tmp_path / name), "--set", "train.batch_size=2", "--set", "train.grpo_n=2",
           "--set", f"rollout.max_tokens={max_tokens}", "--set", f"model.max_model_len={max_model_len}",
           "--set", "model.device=cpu"] + (["--config", str(config)] if config else [])
    proc = spawn(cmd, tmp_path / f"{name}.log", env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, timeout=120.0, log_path=tmp_path / f"{name}.log", interval=0.3)
    except ServerNotReadyError:
        proc.kill()
        raise
    return proc, url


@contextlib.contextmanager
def trace_viewer(exp_dir: Path) -> Iterator[tuple[str, str, int]]:
    """`vibe-rl traces serve EXP_DIR` on a free port -> (base url, its one-time login link, port); stopped after."""
    port = free_port()
    viewer = subprocess.Popen([VIBE_RL, "traces", "serve", str(exp_dir), "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = viewer.stdout.readline()
        link = re.search(r"(http://127\.0\.0\.1:\d+/ui/login\?code=[\w-]+)", line)
        assert link, line
        yield f"http://127.0.0.1:{port}", link[1], port
    finally:
        viewer.terminate()
        viewer.wait(timeout=30)
