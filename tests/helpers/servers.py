"""A real `vibe-rl swarm start` with the tiny model on loopback, for tests that drive a project against it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from helpers.ports import free_port

VIBE_RL = str(Path(sys.executable).parent / "vibe-rl")


def start_server(tmp_path: Path, name: str, max_tokens: int, max_model_len: int, config: Path | None = None,
                 env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    """A tiny-model server (2 tasks x 2 episodes per update, CPU) -> (process, url); its log is tmp_path/NAME.log.
    `config` (the project's config.yaml) declares its static models, which a synced job may only name;
    `env` replaces the server's environment (default: this one)."""
    port = free_port()
    log = open(tmp_path / f"{name}.log", "wb")
    cmd = [VIBE_RL, "swarm", "start", "--port", str(port), "--model", "tiny", "--experiment-dir",
           str(tmp_path / name), "--set", "train.batch_size=2", "--set", "train.grpo_n=2",
           "--set", f"rollout.max_tokens={max_tokens}", "--set", f"model.max_model_len={max_model_len}",
           "--set", "model.device=cpu"] + (["--config", str(config)] if config else [])
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                            env={**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"})
    url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 120
    while True:
        try:
            httpx.get(url + "/healthz", timeout=2.0)
            return proc, url
        except httpx.HTTPError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError((tmp_path / f"{name}.log").read_text()[-3000:]) from None
            time.sleep(0.3)


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
