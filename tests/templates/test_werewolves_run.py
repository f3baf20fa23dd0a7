"""`vibe-rl run` on the committed generated/werewolves project, on this CPU machine: real tmux (a private
socket), real uv venvs, a real swarm server with the tiny model, until the first weight update."""

from __future__ import annotations

import pytest
from project_kit import REPO, copy_with_free_ports, run_until_first_step

PROJECT = REPO / "generated" / "werewolves"


@pytest.mark.slow
def test_run_reaches_the_first_weight_update(tmp_path):
    project = copy_with_free_ports(PROJECT, tmp_path)
    done, report = run_until_first_step(project, keep_out=("OPPONENT_BASE_URL", "OPPONENT_API_KEY"))
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert report["outcome"] == "success" and report["global_step"] >= 1, out[-4000:]
    server, client = report["sessions"]  # named after the project: wolf-<hash>-swarm-server / -client
    assert server.startswith("wolf-") and server.endswith("-swarm-server") and client.endswith("-swarm-client")
    assert "OK" in report["audit"]
    assert "winner" in (project / "logs" / f"{client}.log").read_text()
    # static roles keep the seer's episode busy: no episode idles out, even after the seer dies
    assert "discarded idle episode" not in (project / "logs" / f"{server}.log").read_text()
