"""Shared fixtures for the skills-pack tests."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from skillpack import free_port

from vibe_rl.swarm.launch import ServerNotReadyError, spawn, stop, wait_healthy

VIBE_RL = Path(sys.executable).parent / "vibe-rl"


@pytest.fixture(scope="session")
def npx() -> str:
    """Path of npx, or a skip that says why (the installer runs on Node.js from npm)."""
    path = shutil.which("npx")
    if path is None:
        pytest.skip("npx (Node.js/npm) is not installed: the real `skills` CLI and OpenCode cannot run here")
    return path


@pytest.fixture
def server(tiny_model_dir, tmp_path):
    """A real `vibe-rl swarm start` on a free loopback port with the tiny model; its URL."""
    pytest.importorskip("uvicorn", reason="the swarm server needs the 'server' extra")
    port, exp = free_port(), tmp_path / "experiment"
    log_path = tmp_path / "server.log"
    config = tmp_path / "server.yaml"  # static models come only from the server's own config
    config.write_text("model:\n  path: tiny\nstatic_models:\n- name: opponent\n")
    proc = spawn([str(VIBE_RL), "swarm", "start", "--port", str(port), "--model", "tiny", "--config", str(config),
                  "--experiment-dir", str(exp)], log_path)
    url = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_healthy(url, proc, timeout=300.0, log_path=log_path)
        except ServerNotReadyError as e:
            pytest.fail(str(e))
        yield url
    finally:
        stop(proc, kill_wait=None)
