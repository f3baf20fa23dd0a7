"""Runs the translation template's own grader tests (templates/multi_model_translation/project/test_workflow.py,
which every generated project carries) against the template's pure workflow.py."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2] / "templates" / "multi_model_translation" / "project"


def _load(path: Path, as_name: str):
    spec = importlib.util.spec_from_file_location(as_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[as_name] = module
    spec.loader.exec_module(module)
    return module


def _project_tests():
    """Import the project's test module with its `workflow` bound to this family's module."""
    saved = sys.modules.get("workflow")
    sys.modules["workflow"] = _load(PROJECT / "workflow.py", "translation_workflow")
    try:
        return _load(PROJECT / "test_workflow.py", "translation_workflow_tests")
    finally:
        if saved is None:
            sys.modules.pop("workflow", None)
        else:
            sys.modules["workflow"] = saved


_tests = _project_tests()
globals().update({k: v for k, v in vars(_tests).items() if k.startswith("test_") or k == "scripted_judge"})


def test_the_project_tests_were_collected():
    assert len([k for k in vars(_tests) if k.startswith("test_")]) >= 15
