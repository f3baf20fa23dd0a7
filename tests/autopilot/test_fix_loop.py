"""The fix loop's bounds, driven by a scripted OpenAI-compatible server (no tmux needed)."""

from __future__ import annotations

import shutil

from helpers.scripted_api import ScriptedAPI

from vibe_rl.autopilot.diagnose import Diagnosis
from vibe_rl.autopilot.fixer import ensure_git
from vibe_rl.autopilot.llm import llm_from_env
from vibe_rl.autopilot.runner import Runner, RunOptions

FIXER = {"VIBE_RL_FIX_MODEL": "scripted-fixer"}
NO_MATCH = "WHY: guess\nagent_run.py\n<<<<<<< SEARCH\nthis text is not in the file\n=======\nx\n>>>>>>> REPLACE\n"


def _runner(base_project, tmp_path, llm, **opts):
    proj = tmp_path / "proj"
    shutil.copytree(base_project, proj, ignore=shutil.ignore_patterns(".venv-*", "logs", "experiments", ".git"))
    ensure_git(proj)
    return Runner(RunOptions(project_dir=proj, **opts), llm=llm, out=lambda *_: None), proj


def _diag(proj):
    return Diagnosis("traceback", "NameError: name 'describ' is not defined", "spy-swarm-client",
                     str(proj / "agent_run.py"), 100)


def test_same_failure_three_times_stops(base_project, tmp_path):
    with ScriptedAPI([NO_MATCH]) as server:
        runner, proj = _runner(base_project, tmp_path, llm_from_env(server.env(**FIXER)))
        assert runner._handle(_diag(proj)) is False
        actions = [a.action for a in runner.report.attempts]
        assert len(server.requests) == 2
        assert actions[0].startswith("fix not applied") and actions[1].startswith("fix not applied")
        assert actions[2] == "stopped: the same failure was seen 3 times"
        # the second request tells the LLM what went wrong with the first answer
        assert "attempt 1: fix not applied" in server.requests[1]["messages"][1]["content"]


def test_attempts_are_bounded(base_project, tmp_path):
    with ScriptedAPI([NO_MATCH]) as server:
        runner, proj = _runner(base_project, tmp_path, llm_from_env(server.env(**FIXER)), max_fixes=1)
        assert runner._handle(_diag(proj)) is False
        assert len(server.requests) == 1


def test_without_llm_the_diagnosis_is_the_answer(base_project, tmp_path):
    runner, proj = _runner(base_project, tmp_path, None)
    assert runner._handle(_diag(proj)) is False
    assert runner.report.attempts[0].action.startswith("stopped: no fix LLM")


def test_port_in_use_is_not_sent_to_the_llm(base_project, tmp_path):
    with ScriptedAPI([NO_MATCH]) as server:
        runner, proj = _runner(base_project, tmp_path, llm_from_env(server.env(**FIXER)))
        assert runner._handle(Diagnosis("port_in_use", "port 1 is in use", "s")) is False
        assert server.requests == []
