"""`vibe-rl run` on the committed generated/werewolves project, on this CPU machine: real tmux (a private
socket), real uv venvs, a real swarm server with the tiny model, until the first weight update."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROJECT = REPO / "generated" / "werewolves"
VIBE_RL = str(Path(sys.executable).parent / "vibe-rl")
LLM_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "VIBE_RL_FIX_MODEL",
           "OPPONENT_BASE_URL", "OPPONENT_API_KEY")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def copy_with_free_ports(tmp_path: Path) -> Path:
    dst = tmp_path / PROJECT.name
    shutil.copytree(PROJECT, dst, ignore=shutil.ignore_patterns("__pycache__", ".*", "logs", "experiments"))
    spec = json.loads((dst / "task_spec.json").read_text())
    for server in spec["servers"]:
        server["port"] = free_port()
    (dst / "task_spec.json").write_text(json.dumps(spec, indent=2) + "\n")
    return dst


def run_until_first_step(project: Path) -> tuple[subprocess.CompletedProcess, dict]:
    if not shutil.which("tmux"):
        pytest.skip("tmux is not installed")
    sock = f"vibe-rl-test-{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if k not in LLM_ENV}
    env.update(VIBE_RL_TMUX_SOCKET=sock, PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '')}")
    try:
        done = subprocess.run([VIBE_RL, "run", str(project), "--device", "cpu", "--fix", "off", "--until",
                               "first-step", "--timeout", "600", "--stop"], env=env, capture_output=True, text=True,
                              timeout=900)
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)  # our private server only
    report = json.loads((project / "logs" / "autopilot-report.json").read_text())
    return done, report


@pytest.mark.slow
def test_run_reaches_the_first_weight_update(tmp_path):
    project = copy_with_free_ports(tmp_path)
    done, report = run_until_first_step(project)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert report["outcome"] == "success" and report["global_step"] >= 1, out[-4000:]
    assert report["sessions"] == ["wolf-swarm-server", "wolf-swarm-client"]
    assert "OK" in report["audit"]
    assert "winner" in (project / "logs" / "wolf-swarm-client.log").read_text()
    # static roles keep the seer's episode busy: no episode idles out, even after the seer dies
    assert "discarded idle episode" not in (project / "logs" / "wolf-swarm-server.log").read_text()
