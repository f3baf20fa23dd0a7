"""The generated Who-is-Spy project: size, lint, its own rule tests, dataset, and one full episode against
scripted OpenAI-compatible players (tool-call votes and plain-text votes)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.scripted_api import Answer, ScriptedAPI, ToolCall
from project_kit import REPO, copy_project, pytest_inside, ruff_check

PROJECT = REPO / "generated" / "who_is_spy"


@pytest.fixture
def project(tmp_path) -> Path:
    return copy_project(PROJECT, tmp_path)


def test_roll_scripts_are_short():
    for name in ("agent_roll.py", "agent_roll_adv.py"):
        assert len((PROJECT / name).read_text().splitlines()) < 100, name


def test_ruff_clean():
    done = ruff_check(PROJECT)
    assert done.returncode == 0, done.stdout + done.stderr


def test_game_rules_pass_in_the_project(project):
    done = pytest_inside(project, "test_game_engine.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"\b1\d passed", done.stdout)


def test_dataset_task_ids_are_unique_seeds():
    games = json.loads((PROJECT / "mock_game_dataset.json").read_text())
    seeds = [str(g["seed"]) for g in games]
    assert len(games) == 200 and all(s.strip() for s in seeds) and len(set(seeds)) == len(seeds)
    assert all(g["civilian_word"] != g["spy_word"] for g in games)


def vote(body: dict) -> Answer:
    """A scripted OpenAI-compatible player. Descriptions are text; a civilian votes with a tool call, a spy
    answers in plain text naming a player (the fallback path). Everyone votes the first other living player."""
    if not body.get("tools"):
        return "It is round and you can hold it."
    prompt = body["messages"][-1]["content"]
    me = re.search(r"You are (player_\d+) \(", prompt).group(1)
    seats = re.findall(r"(player_\d+) \(([^)]+)\)", prompt.split("Players alive:")[1].split("\n")[0])
    pid, name = next((p, n) for p, n in seats if p != me)
    if body["user"].startswith("civilian:"):
        return ToolCall("vote", {"player_id": pid})
    return f"I think {name} is suspicious."


DRIVER = """
import json, sys
from vibe_rl.swarm import OpenaiBaseUrlAndApiKey, Task
from agent_run import run_episode
from agent_run_adv import run_episode_adv
url1, url2 = sys.argv[1], sys.argv[2]
games = json.load(open("mock_game_dataset.json"))
task = Task(task_id=str(games[0]["seed"]), metadata=games[0])
c1 = OpenaiBaseUrlAndApiKey(base_url=url1, api_key="k1", model="trainable-1")
c2 = OpenaiBaseUrlAndApiKey(base_url=url2, api_key="k2", model="trainable-2")
out = run_episode(task, c1, seed=7)
adv = run_episode_adv(task, {"server1": c1, "server2": c2}, seed=7)
print(json.dumps({"single": out.model_dump(), "adv": [o.model_dump() for o in adv.values()]}))
"""


def test_episode_wiring_votes_and_rewards(project):
    with ScriptedAPI(vote) as one, ScriptedAPI(vote) as two:
        done = subprocess.run([sys.executable, "-c", DRIVER, one.url, two.url], cwd=project,
                              capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    single, (adv_1, adv_2) = result["single"], result["adv"]
    assert single["metadata"]["winner"] in ("civilian", "spy")
    assert single["reward"] == (1.0 if single["metadata"]["winner"] == "civilian" else 0.0)
    assert single["metadata"]["win"] is (single["metadata"]["winner"] == "civilian")  # eval/win_rate counts it
    assert single["metadata"]["eliminated"], "scripted votes always agree, so someone is voted out"
    ballots = single["metadata"]["ballots"]  # cast at once, recorded in seat order
    assert [voter for when, voter, _ in ballots if when == 1] == list(single["metadata"]["roles"])
    assert all(target for _, _, target in ballots), "every scripted vote names another living player"
    assert adv_1["reward"] + adv_2["reward"] == 1.0  # each server rewarded for its own team
    assert adv_1["reward"] == (1.0 if adv_1["metadata"]["winner"] == "civilian" else 0.0)
    assert [adv_1["metadata"]["win"], adv_2["metadata"]["win"]] == [adv_1["reward"] == 1.0, adv_2["reward"] == 1.0]

    for body in one.requests + two.requests:
        role, pid = body["user"].split(":")
        assert role in ("civilian", "spy") and re.fullmatch(r"player_\d+", pid)
        assert body["max_tokens"] == 256
    # agent_roll: civilians -> the trainable model, spies -> qwen-max, both through server 1's URL
    models = {(b["user"].split(":")[0], b["model"]) for b in one.requests}
    assert ("civilian", "trainable-1") in models and ("spy", "qwen-max") in models
    assert not {("spy", "trainable-1"), ("civilian", "qwen-max")} & models
    # agent_roll_adv: every spy call went to server 2 with its model, none to server 1
    assert {(b["user"].split(":")[0], b["model"]) for b in two.requests} == {("spy", "trainable-2")}
    assert any(b.get("tools") for b in one.requests)
