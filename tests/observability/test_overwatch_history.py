"""Overwatch over a run that reached train.total_steps: FINISHED, integer steps, a reward sparkline over
every update, throughput, and the running episodes it does not list are counted."""

from __future__ import annotations

import os
import subprocess
import sys

from obs_kit import play_to_step

from vibe_rl.swarm import SwarmClient
from vibe_rl.swarm.observe.overwatch import sparkline


def test_sparkline_scales_and_buckets():
    assert sparkline([0.0, 0.5, 1.0]) == "▁▅█"
    assert sparkline([2.0, 2.0]) == "▁▁"
    assert len(sparkline([float(i) for i in range(200)], width=60)) == 60


def test_overwatch_once_after_the_last_step(live_server):
    server = live_server(["train.total_steps=2"])
    with SwarmClient(server.url) as client:
        play_to_step(client, 2)
        status = client.status()  # the server's own status says FINISHED, and it still serves episodes
        assert status.state == "FINISHED" and status.global_step == 2 == status.total_steps, status.state
        running = [client.begin_episode(discard_episode_timeout=600)[0] for _ in range(12)]
        out = subprocess.run([sys.executable, "-c", "from vibe_rl.cli import main; main()", "swarm", "overwatch",
                              "--url", server.url, "--once"], capture_output=True, text=True, timeout=120,
                             env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"})
        for episode_uuid in running:
            client.abort_episode(episode_uuid)
    text = out.stdout
    assert out.returncode == 0, out.stderr
    assert "state FINISHED" in text and "global step 2/2" in text and "train.total_steps=2 reached" in text
    assert "last update: step 2 " in text and "step 2.0" not in text
    assert "reward ▁▁  2 updates, first 0.500, last 0.500" in text
    assert "s/step" in text and "tok/s over the last step" in text
    assert "Running episodes (12)" in text and "2 more running episodes not shown" in text
    assert "progress to the next weight update" not in text
