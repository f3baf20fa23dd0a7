"""Every plan of the planner corpus renders into a project that `vibe-rl doctor` passes, except the plans
that cannot learn on purpose (`doctor_errors` in the case): there doctor reports exactly those errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from vibe_rl.planner.offline import OfflinePlanner
from vibe_rl.scaffold.doctor import diagnose
from vibe_rl.scaffold.render import render_project

REPO = Path(__file__).resolve().parents[2]
CASES = [case for path in sorted((REPO / "tests" / "planner" / "corpus").glob("*.yaml"))
         for case in yaml.safe_load(path.read_text(encoding="utf-8")) if "error" not in case]


@pytest.mark.slow
def test_every_corpus_plan_renders_and_passes_doctor(tmp_path):
    wrong = {}
    for case in CASES:
        text = (REPO / case["seed"]).read_text(encoding="utf-8") if "seed" in case else case["spec"]
        project = tmp_path / case["id"]
        render_project(OfflinePlanner().plan(text, family=case.get("family")), project)
        errors = [f.message for f in diagnose(project) if f.level == "error"]
        want = case.get("doctor_errors", [])
        if len(errors) != len(want) or not all(any(w in e for e in errors) for w in want):
            wrong[case["id"]] = errors
    assert not wrong, wrong
    assert sum("doctor_errors" in case for case in CASES) == 2
