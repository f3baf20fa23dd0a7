"""Runs the Werewolves template's own rule tests (templates/werewolves/project/test_game_engine.py, which
every generated project carries) against the template's pure game_engine.py."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2] / "templates" / "werewolves" / "project"


def _load(path: Path, as_name: str):
    spec = importlib.util.spec_from_file_location(as_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[as_name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def _project_tests():
    """Import the project's test module with its `game_engine` bound to this family's engine."""
    saved = sys.modules.get("game_engine")
    sys.modules["game_engine"] = _load(PROJECT / "game_engine.py", "werewolves_game_engine")
    try:
        return _load(PROJECT / "test_game_engine.py", "werewolves_rule_tests")
    finally:
        if saved is None:
            sys.modules.pop("game_engine", None)
        else:
            sys.modules["game_engine"] = saved


_tests = _project_tests()
globals().update({k: v for k, v in vars(_tests).items() if k.startswith("test_")})
ENGINE = _tests.ge


def test_the_project_tests_were_collected():
    names = [k for k in vars(_tests) if k.startswith("test_")]
    assert len(names) >= 20 and ENGINE.DEFAULT_ROLES == {"werewolf": 3, "seer": 1, "witch": 1, "hunter": 1,
                                                          "villager": 3}
