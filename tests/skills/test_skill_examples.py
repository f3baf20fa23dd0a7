"""The code a skill teaches must work: write-swarm-client's minimal client, copied verbatim from
SKILL.md, drives a real swarm server (tiny model, loopback) to a real weight update."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import yaml
from skillpack import SKILLS_DIR


def _python_block(markdown: str) -> str:
    blocks = re.findall(r"^```python\n(.*?)^```", markdown, re.M | re.S)
    assert blocks, "no python example found"
    return blocks[0]


def test_minimal_client_reaches_a_weight_update(server, tmp_path):
    from vibe_rl.swarm import SwarmClient

    code = _python_block((SKILLS_DIR / "write-swarm-client" / "SKILL.md").read_text(encoding="utf-8"))
    (tmp_path / "agent_roll.py").write_text(code, encoding="utf-8")
    job = {"model": {"path": "tiny", "max_model_len": 256},
           "rollout": {"max_tokens": 4},
           "train": {"batch_size": 2, "grpo_n": 2, "lr": 1e-3},
           "experiment": {"dir": str(tmp_path / "exp")}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(job), encoding="utf-8")

    env = {**os.environ, "VIBE_RL_SWARM_URL": server}
    with open(tmp_path / "client.log", "w") as log:
        client = subprocess.Popen([sys.executable, "agent_roll.py"], cwd=tmp_path, env=env,
                                  stdout=log, stderr=subprocess.STDOUT)
    try:
        status, deadline = {}, time.monotonic() + 600
        while time.monotonic() < deadline and client.poll() is None:
            status = SwarmClient(server).get_engine_status()
            if status.get("global_step", 0) >= 1:
                break
            time.sleep(1)
        assert client.poll() is None, f"the example client died:\n{(tmp_path / 'client.log').read_text()[-3000:]}"
        assert status["global_step"] >= 1, status
        assert status["last_update"] is not None
        assert not status.get("errors"), status["errors"]
    finally:
        client.terminate()
        client.wait(timeout=30)
