"""Shared fixtures for the autopilot's end-to-end tests: one generated project and its uv venvs,
built once per test session; each test gets a copy (venvs linked), its own ports and short name,
on a private tmux socket that is killed at the end."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from vibe_rl.swarm.launch import free_port

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "templates" / "who_is_spy" / "examples" / "seed_prompt.zh.md"
VIBE_RL = str(Path(sys.executable).parent / "vibe-rl")
LLM_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "VIBE_RL_FIX_MODEL",
           "VIBE_RL_FIX_PROVIDER", "DASHSCOPE_API_KEY")


@pytest.fixture(scope="session")
def tmux_socket():
    if not shutil.which("tmux"):
        pytest.skip("tmux is not installed")
    name = f"vibe-rl-test-{uuid.uuid4().hex[:8]}"
    yield name
    subprocess.run(["tmux", "-L", name, "kill-server"], capture_output=True)  # our private server only
    (Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}" / name).unlink(missing_ok=True)


@pytest.fixture(scope="session")
def base_env(tmux_socket):
    env = {k: v for k, v in os.environ.items() if k not in LLM_ENV}
    env["VIBE_RL_TMUX_SOCKET"] = tmux_socket
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    return env


@pytest.fixture(scope="session")
def base_project(tmp_path_factory, base_env):
    """`vibe-rl new` on the seed prompt, plus both venvs (built once for the whole session)."""
    from vibe_rl.autopilot.venvs import ensure_venv

    out = tmp_path_factory.mktemp("base") / "spy_project"
    res = subprocess.run([VIBE_RL, "new", "--spec-file", str(SEED), "--planner", "offline", "--out", str(out)],
                         env=base_env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert (out / "task_spec.json").is_file()
    for kind in ("server", "client"):
        ensure_venv(out, kind, log=lambda *_: None)
    return out


@pytest.fixture
def project(base_project, tmp_path):
    """A fresh copy of the generated project with free ports and its own tmux short name."""
    proj = tmp_path / "proj"
    shutil.copytree(base_project, proj, ignore=shutil.ignore_patterns(".venv-*", "logs", "experiments", ".git"))
    for kind in ("server", "client"):
        (proj / f".venv-{kind}").symlink_to(base_project / f".venv-{kind}")
    spec = json.loads((proj / "task_spec.json").read_text())
    spec["short_name"] = f"t{uuid.uuid4().hex[:6]}"
    for server in spec["servers"]:
        server["port"] = free_port()
    (proj / "task_spec.json").write_text(json.dumps(spec, indent=2))
    return proj


def run_cli(args: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([VIBE_RL, *args], env=env, capture_output=True, text=True, timeout=timeout)


def report_of(project: Path) -> dict:
    return json.loads((project / "logs" / "autopilot-report.json").read_text())
