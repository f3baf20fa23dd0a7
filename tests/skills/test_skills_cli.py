"""`vibe-rl skills install` without the installer's prerequisites: clear errors, nothing written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from skillpack import REPO

VIBE_RL = Path(sys.executable).parent / "vibe-rl"


def _vibe_rl(args: list[str], cwd: Path, path_env: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": path_env}
    return subprocess.run([str(VIBE_RL), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_missing_npx_is_a_clear_error(tmp_path):
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    project = tmp_path / "project"
    project.mkdir()
    result = _vibe_rl(["skills", "install"], cwd=project, path_env=str(empty_bin))
    assert result.returncode == 2
    assert "npx was not found" in result.stderr and "Node.js" in result.stderr
    assert "Traceback" not in result.stderr
    assert list(project.iterdir()) == []


def test_a_source_without_skills_is_refused(tmp_path):
    result = _vibe_rl(["skills", "install", "--source", str(tmp_path)], cwd=tmp_path, path_env=os.environ["PATH"])
    assert result.returncode == 2
    assert "neither a skills/ folder nor a SKILL.md" in result.stderr
    missing = _vibe_rl(["skills", "install", "--source", "./nope"], cwd=tmp_path, path_env=os.environ["PATH"])
    assert missing.returncode == 2 and "no such folder" in missing.stderr


def test_the_installer_command_for_each_agent_choice():
    from vibe_rl.cli.skills import Agent, installer_command, resolve_source

    assert resolve_source(None) == str(REPO)
    base = ["npx", "-y", "-p", "node@22", "-p", "skills", "skills", "add", str(REPO), "--skill", "*"]
    assert installer_command(str(REPO), Agent.all, False) == base + ["-a", "claude-code", "-a", "opencode", "-y"]
    assert installer_command(str(REPO), Agent.opencode, True) == base + ["-a", "opencode", "-y", "-g"]
    assert resolve_source("someone/vibe-rl") == "someone/vibe-rl"   # remote sources pass through
