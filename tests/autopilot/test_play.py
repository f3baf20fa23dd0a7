"""`vibe-rl play`: one episode of a hand-written project against throwaway servers (real server, real client
script, tiny model), printed call by call with the parsed action."""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path

import pytest

VIBE_RL = str(Path(sys.executable).parent / "vibe-rl")
pytestmark = pytest.mark.slow


def test_play_shows_one_episode_of_the_requested_task(tmp_path):
    assert subprocess.run([VIBE_RL, "init", "race"], cwd=tmp_path, capture_output=True).returncode == 0
    project = tmp_path / "race"
    game = runpy.run_path(str(project / "game.py"))
    task = f"2-{game['new_game'](2).turn}"  # seed 2, the seat that moves first (the tiny model forfeits at once)
    res = subprocess.run([VIBE_RL, "play", str(project), "--task", task, "--timeout", "400"],
                         capture_output=True, text=True, timeout=480)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    assert f"task {task}, reward" in out
    assert "--- call 1: seat:seat_" in out and "prompt [user]: The total is" in out
    assert "  reply: " in out and "  action: " in out
    assert not (project / "experiments").exists()  # the project's own experiment folder is untouched
