"""Paths of the skills pack, shared by the tests in this folder."""

from __future__ import annotations

from pathlib import Path

from helpers.ports import free_port  # noqa: F401  (re-exported for these tests)

REPO = Path(__file__).resolve().parents[2]
SKILLS_DIR = REPO / "skills"
SKILL_NAMES = sorted(p.name for p in SKILLS_DIR.iterdir() if (p / "SKILL.md").is_file())
EXPECTED_SKILLS = {"vibe-rl-new", "write-swarm-client", "debug-swarm-training", "install-vibe-rl"}

