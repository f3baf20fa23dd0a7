"""Shared fixtures for the skills-pack tests."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from skillpack import free_port

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
    pytest.importorskip("fastapi", reason="the swarm server needs the 'server' extra")
    import httpx

    port, exp = free_port(), tmp_path / "experiment"
    log_path = tmp_path / "server.log"
    config = tmp_path / "server.yaml"  # static models come only from the server's own config
    config.write_text("model:\n  path: tiny\nstatic_models:\n- name: opponent\n")
    with open(log_path, "w") as log:
        proc = subprocess.Popen([str(VIBE_RL), "swarm", "start", "--port", str(port), "--model", "tiny",
                                 "--config", str(config), "--experiment-dir", str(exp)],
                                stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(1500):
            if proc.poll() is not None:
                pytest.fail(f"server exited: {log_path.read_text()[-3000:]}")
            try:
                if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            pytest.fail(f"server never answered /healthz: {log_path.read_text()[-3000:]}")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
