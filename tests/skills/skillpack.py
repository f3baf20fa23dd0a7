"""Paths of the skills pack, shared by the tests in this folder."""

from __future__ import annotations

import socket
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SKILLS_DIR = REPO / "skills"
SKILL_NAMES = sorted(p.name for p in SKILLS_DIR.iterdir() if (p / "SKILL.md").is_file())
EXPECTED_SKILLS = {"vibe-rl-new", "write-swarm-client", "debug-swarm-training", "install-vibe-rl"}


def free_port() -> int:
    """A loopback port that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
