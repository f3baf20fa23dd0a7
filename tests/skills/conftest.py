"""Shared helpers for the skills-pack tests."""

from __future__ import annotations

import shutil

import pytest


@pytest.fixture(scope="session")
def npx() -> str:
    """Path of npx, or a skip that says why (the installer runs on Node.js from npm)."""
    path = shutil.which("npx")
    if path is None:
        pytest.skip("npx (Node.js/npm) is not installed: the real `skills` CLI and OpenCode cannot run here")
    return path
