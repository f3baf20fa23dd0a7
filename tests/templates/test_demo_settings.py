"""The CPU demo's settings (scripts/demo_settings.py): its plan renders a Who-is-Spy project whose reward is
the one the demo states, and the flags it hands to `vibe-rl run` and warm_start.py are well formed."""

from __future__ import annotations

import subprocess
import sys

from project_kit import REPO

from vibe_rl.planner.offline import OfflinePlanner
from vibe_rl.scaffold import render_project
from vibe_rl.schema import TaskSpec

SETTINGS = REPO / "scripts" / "demo_settings.py"
sys.path.insert(0, str(SETTINGS.parent))
import demo_settings  # noqa: E402


def test_the_demo_plan_renders_the_reward_it_states(tmp_path):
    seed = (REPO / "templates" / "who_is_spy" / "examples" / "seed_prompt.zh.md").read_text(encoding="utf-8")
    spec = demo_settings.demo_plan(OfflinePlanner().plan(seed).model_dump(mode="json"))
    render_project(TaskSpec.model_validate(spec), tmp_path / "demo")
    engine = (tmp_path / "demo" / "game_engine.py").read_text()
    assert "SHAPED_REWARD = True" in engine and "MAX_ROUNDS = 1" in engine and "NUM_PLAYERS = 4" in engine
    assert "HIT_CREDIT = 0.0" in engine
    win, loss = demo_settings.DEMO_REWARD["win"], demo_settings.DEMO_REWARD["loss"]
    assert f"WIN, LOSS = {win}, {loss}" in (tmp_path / "demo" / "agent_run.py").read_text()
    stated = subprocess.run([sys.executable, str(SETTINGS), "reward"], capture_output=True, text=True, check=True)
    assert "outcome weighted" in stated.stdout and "legal" in stated.stdout and "hit_credit 0" in stated.stdout


def test_the_flags_are_well_formed():
    sets = subprocess.run([sys.executable, str(SETTINGS), "sets"], capture_output=True, text=True, check=True)
    flags = sets.stdout.split()
    assert flags[::2] == ["--set"] * len(demo_settings.DEMO_SETS) and all("=" in f for f in flags[1::2])
    warm = demo_settings.WARM_START
    assert all(flag.startswith("--") for flag in warm[::2]) and demo_settings.DEMO_STEPS >= 6  # first 3 vs last 3
