"""`vibe-rl run` end to end on this CPU machine: real tmux, real uv venvs, real swarm server (tiny model).

Each run ends its sessions with --stop; all of them live on a private tmux socket.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest
from helpers.scripted_api import ScriptedAPI

from vibe_rl.autopilot import identity

from .conftest import VIBE_RL, report_of, run_cli

pytestmark = pytest.mark.slow


def _sessions_gone(env, report) -> bool:
    sock = env["VIBE_RL_TMUX_SOCKET"]
    return all(subprocess.run(["tmux", "-L", sock, "has-session", "-t", f"={name}"], capture_output=True).returncode
               for name in report["sessions"])


def test_new_then_run_reaches_the_first_weight_update(project, base_env):
    res = run_cli(["run", str(project), "--until", "first-step", "--timeout", "480", "--stop"], base_env)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-4000:]
    rep = report_of(project)
    assert rep["outcome"] == "success" and rep["global_step"] >= 1
    assert rep["seconds_to_first_step"] > 0 and "time from start to this run's first weight update" in out
    assert rep["start_steps"] == {"server1": 0} and rep["new_updates"]["server1"] >= 1
    short = json.loads((project / "task_spec.json").read_text())["short_name"] + "-" + identity.key(project)
    assert rep["sessions"] == [f"{short}-swarm-server", f"{short}-swarm-client"]
    assert f"attach -t {short}-swarm-server" in out and "vibe-rl swarm overwatch --url http://127.0.0.1:" in out
    assert "tiny" in out  # the CPU note is visible
    assert "trace audit" in rep["audit"] and "OK" in rep["audit"]
    # pane output went to the log files too
    server_log = (project / "logs" / f"{short}-swarm-server.log").read_text()
    assert "vibe-rl swarm server on http://127.0.0.1" in server_log
    assert (project / "logs" / f"{short}-swarm-client.log").is_file()
    assert _sessions_gone(base_env, rep)


def test_empty_task_ids_are_diagnosed_as_such(project, base_env):
    data = project / "mock_game_dataset.json"
    games = json.loads(data.read_text())
    for game in games:
        game["seed"] = ""  # the tutorial's bug: every task_id is the empty string
    data.write_text(json.dumps(games))
    res = run_cli(["run", str(project), "--until", "first-step", "--timeout", "300", "--stop"], base_env)
    out = res.stdout + res.stderr
    assert res.returncode != 0
    rep = report_of(project)
    assert rep["outcome"] == "failed" and "[empty_task_id]" in rep["final_diagnosis"], out[-3000:]
    assert "timeout" not in rep["final_diagnosis"]
    assert "task_id=str(seed)" in out  # the suggested fix is printed
    assert _sessions_gone(base_env, rep)


def test_one_task_id_for_every_game_is_seen_in_the_pool(project, base_env):
    data = project / "mock_game_dataset.json"
    games = json.loads(data.read_text())
    for game in games:
        game["seed"] = 7  # non-empty, but the same for every game: the pool never holds batch_size tasks
    data.write_text(json.dumps(games))
    res = run_cli(["run", str(project), "--until", "first-step", "--timeout", "600", "--stop"], base_env, timeout=700)
    out = res.stdout + res.stderr
    assert res.returncode != 0
    rep = report_of(project)
    assert "[repeated_task_id]" in rep["final_diagnosis"], out[-3000:]
    assert "task_id='7'" in rep["final_diagnosis"]  # the pool's task table is the evidence


def test_spy_wired_to_the_civilians_server_fails_the_trace_audit(project, base_env):
    run = project / "agent_run.py"
    text = run.read_text()
    assert '"spy": "qwen-max"' in text
    run.write_text(text.replace('"spy": "qwen-max"', '"spy": "server1"'))
    res = run_cli(["run", str(project), "--until", "first-step", "--timeout", "300", "--stop"], base_env)
    out = res.stdout + res.stderr
    assert res.returncode != 0
    rep = report_of(project)
    assert "[trace_mismatch]" in rep["final_diagnosis"], out[-3000:]
    assert "spy:player_" in rep["final_diagnosis"]
    assert "should call static model 'qwen-max' but called trainable server 'server1'" in out


def test_fix_loop_refuses_outside_edit_then_fixes_commits_and_reaches_step_one(project, base_env, tmp_path):
    run = project / "agent_run.py"
    good = next(line.strip() for line in run.read_text().splitlines() if "game.describe(player.pid, describe(game" in line)
    bad = good.replace("describe(game", "describ(game")
    run.write_text(run.read_text().replace(good, bad))
    assert bad in run.read_text()
    outside = tmp_path / "outside.py"
    outside.write_text("x = 1\n")
    refused = "WHY: edit a helper elsewhere\n../outside.py\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n"
    fix = (f"WHY: typo: describ() is describe()\nagent_run.py\n<<<<<<< SEARCH\n{bad}\n=======\n{good}\n"
           ">>>>>>> REPLACE\n")
    with ScriptedAPI([refused, fix]) as llm:
        env = {**base_env, **llm.env(VIBE_RL_FIX_MODEL="scripted-fixer")}
        res = run_cli(["run", str(project), "--until", "first-step", "--timeout", "480", "--stop"], env)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-4000:]
    assert outside.read_text() == "x = 1\n"
    rep = report_of(project)
    actions = [a["action"] for a in rep["attempts"]]
    assert any("refused" in a and "outside the project" in a for a in actions), actions
    assert any(a.startswith("fixed in agent_run.py") for a in actions), actions
    assert rep["outcome"] == "success" and rep["global_step"] >= 1
    assert good in run.read_text()
    # the LLM saw the failure and the file it names
    prompt = llm.requests[0]["messages"][1]["content"]
    assert "NameError" in prompt and "describ" in prompt and "# agent_run.py" in prompt
    patches = sorted((project / "logs" / "fixes").glob("*.patch"))  # a refused answer writes none
    assert [p.name for p in patches] == ["001-traceback.patch"]
    patch = patches[0].read_text()
    assert "autopilot fix: typo: describ() is describe()" in patch and "NameError" in patch and good in patch
    assert not (project / ".git").exists()  # the fix loop never creates a repository
    # the key went to the LLM server, never to our output or logs
    assert "sk-test-secret" not in out
    assert all("sk-test-secret" not in p.read_text(errors="replace")  # the patches under logs/fixes/ too
               for p in (project / "logs").rglob("*") if p.is_file())


def test_sigterm_with_stop_ends_the_sessions(project, base_env):
    """`timeout` or `kill` ends a run like Ctrl-C: with --stop its sessions do not outlive it."""
    proc = subprocess.Popen([VIBE_RL, "run", str(project), "--until", "steps:1000", "--timeout", "300", "--stop"],
                            env=base_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    short = json.loads((project / "task_spec.json").read_text())["short_name"]
    client = f"{short}-{identity.key(project)}-swarm-client"
    sock = base_env["VIBE_RL_TMUX_SOCKET"]
    deadline = time.monotonic() + 240
    while subprocess.run(["tmux", "-L", sock, "has-session", "-t", f"={client}"], capture_output=True).returncode:
        assert proc.poll() is None and time.monotonic() < deadline, "the client session never started"
        time.sleep(0.5)
    os.kill(proc.pid, signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    rep = report_of(project)
    assert rep["outcome"] == "stopped", out[-3000:]
    assert proc.returncode == 130, out[-3000:]  # interrupted, as shells report Ctrl-C
    assert _sessions_gone(base_env, rep)
