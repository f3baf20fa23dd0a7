"""Smoke: one full agent_run episode of the generated Who-is-Spy project against a real swarm server on
loopback with the tiny model. Whatever the model says, the game must end with a legal winner and reward,
and the server's traces must show civilians on the trainable model and spies on the static qwen-max.
The project runs with TRAIN_DESCRIBE off (the SmolLM2 demo's setting): the civilians' describe calls reach
the server as context_only, their votes as trained turns."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest
import yaml
from helpers.servers import start_server, stop_server
from project_kit import REPO, copy_project

DRIVER = """
import json, sys
from vibe_rl.swarm import SwarmClient, Task, TrainJob
from agent_run import run_episode
swarm = SwarmClient(sys.argv[1])
swarm.auto_sync_train_config_and_start_engine(TrainJob.from_yaml("config_cpu.yaml"), verbose=False)
game = json.load(open("mock_game_dataset.json"))[0] | {"max_rounds": 2}
task = Task(task_id=str(game["seed"]), metadata=game)
episode_uuid, creds = swarm.begin_episode(discard_episode_timeout=600)
output = run_episode(task, creds)
swarm.end_episode(task, episode_uuid, output)
calls = [c for c in swarm.get_traces(limit=1000)["calls"] if c["episode_uuid"] == episode_uuid]
print(json.dumps({"output": output.model_dump(), "model": creds.model, "calls": calls}))
"""


@pytest.mark.slow
def test_one_episode_against_a_real_swarm_server(tmp_path, tiny_model_dir):
    project = copy_project(REPO / "generated" / "who_is_spy", tmp_path)
    # The CPU variant of config.yaml: tiny model and one-episode groups. qwen-max keeps its DashScope URL;
    # with DASHSCOPE_API_KEY unset the server serves it as a frozen local copy (no key or network here).
    job = yaml.safe_load((project / "config.yaml").read_text())
    job["model"].update(path="tiny", max_model_len=2048)
    job["train"].update(batch_size=1, grpo_n=1)
    (project / "config_cpu.yaml").write_text(yaml.safe_dump(job))
    run_file = project / "agent_run.py"
    run_file.write_text(run_file.read_text().replace("TRAIN_DESCRIBE = True", "TRAIN_DESCRIBE = False", 1))

    env = {k: v for k, v in os.environ.items() if k != "DASHSCOPE_API_KEY"}
    env.update(VIBE_RL_MAX_TOKENS="24", PYTHONUNBUFFERED="1")
    server, url = start_server(tmp_path, "server", 24, 2048, config=project / "config_cpu.yaml", env=env)
    try:  # config_cpu.yaml declares qwen-max (static)
        done = subprocess.run([sys.executable, "-c", DRIVER, url], cwd=project, capture_output=True, text=True,
                              timeout=600, env=env)
        assert done.returncode == 0, done.stderr[-4000:] + (tmp_path / "server.log").read_text()[-4000:]
    finally:
        stop_server(server)

    result = json.loads(done.stdout.strip().splitlines()[-1])
    output, calls = result["output"], result["calls"]
    winner = output["metadata"]["winner"]
    assert winner in ("civilian", "spy")
    assert output["reward"] == (1.0 if winner == "civilian" else 0.0)
    assert 1 <= output["metadata"]["rounds"] <= 2
    roles = output["metadata"]["roles"]
    assert calls, "the server recorded no calls of this episode"
    for call in calls:
        role, pid = call["player"].split(":")
        assert roles[pid] == role
        if role == "civilian":
            assert (call["model"], call["static"]) == (result["model"], False)
        else:
            assert (call["model"], call["static"]) == ("qwen-max", True)
    assert {c["player"].split(":")[0] for c in calls} == {"civilian", "spy"}

    rows = sqlite3.connect(tmp_path / "server" / "swarm.sqlite").execute(
        "SELECT messages_json, context_only FROM turns WHERE static = 0").fetchall()
    asked = [(json.loads(m)[-1]["content"].rsplit("\n", 1)[-1].split()[0], bool(c)) for m, c in rows]
    assert {("Describe", True), ("Vote", False)} == set(asked), asked  # describes are context, votes trained
