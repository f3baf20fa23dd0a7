"""The code a skill teaches must work: write-swarm-client's minimal client, copied verbatim from
SKILL.md, drives a real swarm server (tiny model, loopback) to a real weight update."""

from __future__ import annotations

import json
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


def test_worked_example_spec_plans_as_documented(tmp_path):
    """vibe-rl-new's worked example: its spec, planned offline, gives the TaskSpec the text tells the user to expect."""
    text = (SKILLS_DIR / "vibe-rl-new" / "references" / "worked-example.md").read_text(encoding="utf-8")
    spec = re.search(r"`spec\.md`:\n\n```\n(.*?)^```", text, re.M | re.S).group(1)
    (tmp_path / "spec.md").write_text(spec, encoding="utf-8")
    vibe_rl = os.path.join(os.path.dirname(sys.executable), "vibe-rl")
    result = subprocess.run([vibe_rl, "new", "--spec-file", "spec.md", "--planner", "offline", "--dry-run", "--json"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert list(tmp_path.iterdir()) == [tmp_path / "spec.md"], "a dry run writes nothing"
    assert plan["family"] == "who_is_spy"
    assert {t["name"]: t["model"] for t in plan["teams"]} == {"civilians": "server1", "spies": "qwen-max"}
    assert plan["static_models"][0]["api_key_env"] == "DASHSCOPE_API_KEY"
    assert plan["servers"][0]["model_path"] == "/models/qwen7b"
    assert (plan["training"]["batch_size"], plan["training"]["grpo_n"]) == (16, 4)
    adv = next(m for m in plan["modes"] if m["name"] == "agent_roll_adv")
    assert adv["teams"] == {"civilians": "server1", "spies": "server2"}
    assert adv["gpus"] == {"server1": 4, "server2": 4}
