"""Runs the Werewolves template's own rule tests (templates/werewolves/project/test_game_engine.py, which
every generated project carries) against the template's pure game_engine.py."""

from __future__ import annotations

from pathlib import Path

from project_kit import load_project_tests

PROJECT = Path(__file__).resolve().parents[2] / "templates" / "werewolves" / "project"


_tests = load_project_tests(PROJECT, "game_engine", "werewolves", "test_game_engine.py")
globals().update({k: v for k, v in vars(_tests).items() if k.startswith("test_")})
ENGINE = _tests.ge


def test_the_project_tests_were_collected():
    names = [k for k in vars(_tests) if k.startswith("test_")]
    assert len(names) >= 20 and ENGINE.DEFAULT_ROLES == {"werewolf": 3, "seer": 1, "witch": 1, "hunter": 1,
                                                          "villager": 3}
