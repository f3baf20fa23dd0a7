"""`vibe-rl run` on the committed generated/multi_model_translation project, on this CPU machine: real tmux (a private
socket), real uv venvs, two real swarm servers with the tiny model, until both have made their first weight update."""

from __future__ import annotations

import pytest
from project_kit import REPO, copy_with_free_ports, run_until_first_step

PROJECT = REPO / "generated" / "multi_model_translation"


@pytest.mark.slow
def test_run_reaches_the_first_weight_update(tmp_path):
    project = copy_with_free_ports(PROJECT, tmp_path)
    done, report = run_until_first_step(project, keep_out=("JUDGE_MODEL", "JUDGE_BASE_URL", "JUDGE_API_KEY"))
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert report["outcome"] == "success" and report["global_step"] >= 1, out[-4000:]
    server, server2, client = report["sessions"]  # named after the project: trans-<hash>-swarm-...
    assert server.startswith("trans-") and server2 == f"{server}-2" and client.endswith("-swarm-client")
    assert "OK" in report["audit"]
    for log in (f"{server}.log", f"{server2}.log"):  # each server stepped on its own rewards
        assert "weight update 1" in (project / "logs" / log).read_text(), log
    assert "rewards server1" in (project / "logs" / f"{client}.log").read_text()
