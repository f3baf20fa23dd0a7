"""The turn_based family: an unknown game is refused offline with a pointer to `--family turn_based`, which
renders a skeleton whose rules tests pass, doctor is clean, and one episode plays on a real swarm server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers.servers import start_server, stop_server

REPO = Path(__file__).resolve().parents[2]
VIBE_RL = str(Path(sys.executable).parent / "vibe-rl")
SEED = REPO / "templates" / "turn_based" / "examples" / "seed_prompt.en.md"
ZH = "训练一个玩“抢三十”的智能体：4 名玩家轮流报数，每次报 1 到 2 个数，谁先报到 30 谁赢。使用 2 张卡，batch size 4。"


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, cwd=cwd, timeout=300)


def test_unknown_game_is_refused_and_names_the_skeleton(tmp_path):
    done = run(VIBE_RL, "new", ZH, "--planner", "offline", cwd=tmp_path)
    assert done.returncode != 0 and "--family turn_based" in done.stderr
    assert not any(tmp_path.iterdir())


def test_skeleton_renders_passes_its_tests_and_doctor(tmp_path):
    done = run(VIBE_RL, "new", "--spec-file", str(SEED), "--family", "turn_based", "--planner", "offline",
               "--out", "p", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    project = tmp_path / "p"
    spec = json.loads((project / "task_spec.json").read_text())
    assert spec["game"]["num_players"] == 3 and spec["game"]["title"] == "Last Stone"
    assert spec["servers"][0]["model_path"] == "Qwen/Qwen2.5-1.5B-Instruct"
    assert (spec["training"]["batch_size"], spec["training"]["grpo_n"], spec["gpus"]) == (8, 4, 1)
    assert "takes 1, 2 or 3 stones" in (project / "game_rules.py").read_text()  # the spec, quoted
    assert "# ---- WRITE:" in (project / "game_rules.py").read_text()
    tests = run(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_game_rules.py", cwd=project)
    assert tests.returncode == 0, tests.stdout
    doctor = run(VIBE_RL, "doctor", str(project), "--json", cwd=tmp_path)
    report = json.loads(doctor.stdout)
    assert doctor.returncode == 0 and report["errors"] == 0, doctor.stdout
    # the only warning: the game's own numbers, which the rules module (not the plan) must implement
    assert [f["message"] for f in report["findings"]] == [
        "the planner did not understand 'on their turn a player takes 1, 2 or 3 stones': the plan may miss a fact"]


def test_chinese_spec_goes_to_spec_md_not_into_code(tmp_path):
    done = run(VIBE_RL, "new", ZH, "--family", "turn_based", "--planner", "offline", "--out", "p", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    project = tmp_path / "p"
    assert ZH in (project / "spec.md").read_text() and "spec.md" in (project / "game_rules.py").read_text()
    spec = json.loads((project / "task_spec.json").read_text())
    assert (spec["game"]["num_players"], spec["gpus"], spec["training"]["batch_size"]) == (4, 2, 4)
    assert any("30" in clause for clause in spec["unparsed"])  # the game's own numbers are the rules' job
    assert run(VIBE_RL, "doctor", str(project), cwd=tmp_path).returncode == 0


@pytest.mark.parametrize("text", [
    "训练一个报数游戏的智能体，4 名玩家轮流报数。所有玩家共享一个可训练模型 /models/q05，1 张显卡",
    "Liar's dice for 4 players. Train /models/q7 by self-play on 2 GPUs, batch size 8",
])
def test_self_play_spec_is_told_the_opponents_are_frozen(text):
    """A spec asking every seat to train got one learner seat against a frozen 'opponent' with only the generic
    'No opponent model named' note: it must say that the asked-for self-play is not what the skeleton does."""
    from vibe_rl.planner.offline import OfflinePlanner
    spec = OfflinePlanner().plan(text, family="turn_based")
    assert {t.name: t.model for t in spec.teams} == {"learners": "server1", "opponents": "opponent"}
    said = [n for n in spec.notes if "asks for self-play" in n]
    assert len(said) == 1 and "frozen copy of the trainable model that does not learn" in said[0]


def test_seed_spec_has_no_self_play_note():
    from vibe_rl.planner.offline import OfflinePlanner
    spec = OfflinePlanner().plan(SEED.read_text(encoding="utf-8"), family="turn_based")
    assert not [n for n in spec.notes if "self-play" in n]


DRIVER = """
import json, sys
from vibe_rl.swarm import SwarmClient, Task, TrainJob
from agent_run import run_episode
swarm = SwarmClient(sys.argv[1])
swarm.auto_sync_train_config_and_start_engine(TrainJob.from_yaml("config_cpu.yaml"), verbose=False)
game = json.load(open("mock_game_dataset.json"))[0]
task = Task(task_id=str(game["seed"]), metadata=game)
episode_uuid, creds = swarm.begin_episode(discard_episode_timeout=600)
output = run_episode(task, creds, seed=1)
swarm.end_episode(task, episode_uuid, output)
calls = [c for c in swarm.get_traces(limit=1000)["calls"] if c["episode_uuid"] == episode_uuid]
print(json.dumps({"output": output.model_dump(), "calls": calls}))
"""


@pytest.mark.slow
def test_one_episode_on_a_real_swarm_server(tmp_path, tiny_model_dir):
    done = run(VIBE_RL, "new", "--spec-file", str(SEED), "--family", "turn_based", "--planner", "offline",
               "--out", "p", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    project = tmp_path / "p"
    job = yaml.safe_load((project / "config.yaml").read_text())
    job["model"].update(path="tiny", max_model_len=2048)
    job["train"].update(batch_size=1, grpo_n=1)
    (project / "config_cpu.yaml").write_text(yaml.safe_dump(job))
    env = {**os.environ, "VIBE_RL_MAX_TOKENS": "16", "PYTHONUNBUFFERED": "1"}
    server, url = start_server(tmp_path, "server", 16, 2048, config=project / "config_cpu.yaml")
    try:
        done = subprocess.run([sys.executable, "-c", DRIVER, url], cwd=project, capture_output=True, text=True,
                              timeout=600, env=env)
        assert done.returncode == 0, done.stderr[-4000:] + (tmp_path / "server.log").read_text()[-4000:]
    finally:
        stop_server(server)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    meta = result["output"]["metadata"]
    assert meta["winner"] == [] or len(meta["winner"]) == 1
    assert result["output"]["reward"] == (1.0 if meta["learner"] in meta["winner"] and not meta["forfeit"] else 0.0)
    routes = {(c["player"].split(":")[0], c["static"]) for c in result["calls"]}
    assert ("learner", False) in routes and routes <= {("learner", False), ("opponent", True)}, result["calls"][:3]
    learner_calls = sum(c["player"].startswith("learner:") for c in result["calls"])
    if meta["forfeit"]:  # the tiny model rarely names a legal action: its last call was the forfeit, a LOSS
        assert result["output"]["reward"] == 0.0 and meta["winner"] == [] and learner_calls >= 1
    assert 0 <= meta["opponent_fallbacks"] <= meta["turns"]
    assert meta["win"] == (meta["learner"] in meta["winner"])  # what an eval episode's win rate counts
