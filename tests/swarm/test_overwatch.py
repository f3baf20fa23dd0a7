"""`vibe-rl swarm overwatch --once` against a live server: the pile-up bug stands out."""

from __future__ import annotations

import os
import subprocess
import sys

from vibe_rl.swarm import SwarmClient, Task, WorkflowOutput


def overwatch_once(url: str) -> str:
    out = subprocess.run([sys.executable, "-c", "from vibe_rl.cli import main; main()", "swarm", "overwatch",
                          "--url", url, "--once"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "COLUMNS": "220", "NO_COLOR": "1"})
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_overwatch_shows_state_pool_running_tasks_and_the_pile_up(shared_server):
    client = SwarmClient(shared_server.url)
    text = overwatch_once(shared_server.url)
    assert "ROLLING" in text and "global step 0" in text and "-> Completed tasks (chosen)" in text
    assert "WARNING" not in text

    for i in range(12):  # the reference bug: every episode reported under one repeated task_id
        episode_uuid, _ = client.begin_episode()
        client.end_episode(Task(task_id="0"), episode_uuid, WorkflowOutput(reward=float(i % 2)))
    running, _ = client.begin_episode()
    text = overwatch_once(shared_server.url)
    assert "WARNING: pile-up under task_id '0'" in text and "12 episodes piled under task_id '0' (grpo_n=4)" in text
    assert "Average episodes per task" in text and "12.00" in text
    assert "0.500 ± 0.500" in text  # per-task reward mean +- std
    assert running[:12] in text  # the running episode's row
    status = client.get_engine_status()
    assert status["pool"]["completed_tasks"] == 1 and status["global_step"] == 0  # stuck, as in the tutorial
    client.abort_episode(running)


def test_overwatch_reports_an_unreachable_server():
    out = subprocess.run([sys.executable, "-c", "from vibe_rl.cli import main; main()", "swarm", "overwatch",
                          "--url", "http://127.0.0.1:9", "--once"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "cannot read" in out.stdout
