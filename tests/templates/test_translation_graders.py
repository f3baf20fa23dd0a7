"""Runs the translation template's own grader tests (templates/multi_model_translation/project/test_workflow.py,
which every generated project carries) against the template's pure workflow.py."""

from __future__ import annotations

from pathlib import Path

from project_kit import load_project_tests

PROJECT = Path(__file__).resolve().parents[2] / "templates" / "multi_model_translation" / "project"


_tests = load_project_tests(PROJECT, "workflow", "translation", "test_workflow.py")
globals().update({k: v for k, v in vars(_tests).items() if k.startswith("test_") or k == "scripted_judge"})


def test_the_project_tests_were_collected():
    assert len([k for k in vars(_tests) if k.startswith("test_")]) >= 15
