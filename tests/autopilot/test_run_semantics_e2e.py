"""What an agent relies on from `vibe-rl run`, end to end on this CPU machine (real tmux, uv venvs, servers):
a second run after a rule change says it resumed and counts only its own updates; two projects of one
family run side by side (own sessions, own ports, a busy port moved) under --detach + `vibe-rl status`."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess

import pytest

from vibe_rl.autopilot import identity
from vibe_rl.schema.spec import TaskSpec
from vibe_rl.swarm.server.store import Store

from .conftest import report_of, run_cli

pytestmark = pytest.mark.slow


def test_second_run_after_a_rule_change_reports_the_resume_and_counts_only_new_updates(project, base_env):
    first = run_cli(["run", str(project), "--until", "first-step", "--set", "train.save_freq=1", "--timeout", "540",
                     "--stop"], base_env)
    assert first.returncode == 0, (first.stdout + first.stderr)[-4000:]
    exp = project / "experiments" / "server1"
    resumed = json.loads((exp / "checkpoints" / "latest.json").read_text())["step"]
    assert resumed >= 1
    store = Store(exp / "swarm.sqlite")
    untrained = store.count_untrained(resumed)
    store.close()

    engine = project / "game_engine.py"
    text, n = re.subn(r"MAX_ROUNDS = (\d+)", lambda m: f"MAX_ROUNDS = {int(m.group(1)) - 1}", engine.read_text())
    assert n == 1
    engine.write_text(text)  # a rule changed: episodes recorded under the old rules must not be trained

    second = run_cli(["run", str(project), "--until", "first-step", "--set", "train.save_freq=1", "--timeout", "540",
                      "--stop"], base_env)
    out = second.stdout + second.stderr
    assert second.returncode == 0, out[-4000:]
    rep = report_of(project)
    assert f"server1: resuming the checkpoint at global step {resumed}" in out
    assert rep["start_steps"] == {"server1": resumed}
    assert rep["new_updates"]["server1"] >= 1 and rep["global_step"] >= resumed + 1  # a new update, not the old step
    assert f"resumed from a checkpoint (server1 at step {resumed}); those earlier steps are not counted" in out
    store = Store(exp / "swarm.sqlite")
    stale = store.counts().get("stale", 0)
    store.close()
    assert stale == untrained  # every episode of the old rules was set aside, none retrained
    if untrained:
        assert f"set aside {untrained} untrained episodes" in out and "the project's files changed" in out


def _copy(base_project, dest):
    shutil.copytree(base_project, dest, ignore=shutil.ignore_patterns(".venv-*", "logs", "experiments", ".git"))
    for kind in ("server", "client"):
        (dest / f".venv-{kind}").symlink_to(base_project / f".venv-{kind}")
    return dest


def test_two_projects_of_one_family_run_side_by_side_with_detach_and_status(base_project, tmp_path, base_env):
    a = _copy(base_project, tmp_path / "alice" / "spy")
    b = _copy(base_project, tmp_path / "bob" / "spy")  # same folder name, same task_spec.json
    assert (a / "task_spec.json").read_text() == (b / "task_spec.json").read_text()
    spec_port = TaskSpec.load(a).servers[0].port
    held_port = identity.default_port(spec_port, b)
    with socket.socket() as held:  # someone else listens on bob's own port
        held.bind(("127.0.0.1", held_port))
        held.listen()
        for proj in (a, b):
            res = run_cli(["run", str(proj), "--until", "first-step", "--detach", "--stop", "--timeout", "540"],
                          base_env, timeout=60)
            assert res.returncode == 0 and "vibe-rl status" in res.stdout, res.stdout + res.stderr
        early = run_cli(["status", str(a)], base_env, timeout=60)
        assert early.returncode in (0, 3), early.stdout + early.stderr  # answers at once, running or done
        outs = {}
        for proj in (a, b):
            res = run_cli(["status", str(proj), "--wait", "560"], base_env, timeout=620)
            outs[proj] = res.stdout + res.stderr
            log = (proj / "logs" / "run.log").read_text()
            assert res.returncode == 0, outs[proj][-3000:] + "\n--- run.log ---\n" + log[-3000:]
            assert "training has started" in outs[proj] or "weight updates made" in outs[proj]
    ra, rb = report_of(a), report_of(b)
    assert ra["outcome"] == rb["outcome"] == "success"
    assert set(ra["sessions"]).isdisjoint(rb["sessions"])
    assert ra["overwatch"] != rb["overwatch"]
    moved = [n for n in rb["notes"] if f"port {held_port} is in use by another process" in n]
    assert moved and f"http://127.0.0.1:{held_port}" not in rb["overwatch"][0], rb["notes"]
    sock = base_env["VIBE_RL_TMUX_SOCKET"]
    for name in ra["sessions"] + rb["sessions"]:  # --stop ended each project's own sessions
        assert subprocess.run(["tmux", "-L", sock, "has-session", "-t", f"={name}"], capture_output=True).returncode
