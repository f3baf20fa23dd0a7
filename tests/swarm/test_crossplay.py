"""`vibe-rl eval DIR --checkpoints ...`: a Who-is-Spy project trains the tiny model to steps 1 and 2 on a real server
(save_freq 1), then the real command plays a cross-play table of its checkpoints on a throwaway server: every cell
holds the same held-out games, the civilians on the row's checkpoint and the spy on the column's, nothing trained."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from vibe_rl.swarm import SwarmClient, Task, TrainJob, WorkflowOutput
from vibe_rl.swarm.launch import free_port, spawn, stop, wait_healthy
from vibe_rl.swarm.observe.crossplay import CrossPlayError, available_steps, resolve

REPO = Path(__file__).resolve().parents[2]
VIBE_RL = [sys.executable, "-c", "from vibe_rl.cli import main; main()"]
FAST = ["--model", "tiny", "--max-tokens", "8", "--set", "model.device=cpu", "--set", "model.max_model_len=2048"]


def copy_project(name: str, dst: Path) -> Path:
    shutil.copytree(REPO / "generated" / name, dst, ignore=shutil.ignore_patterns("__pycache__", ".*", "experiments"))
    return dst


def train_two_steps(project: Path, exp: Path, log: Path) -> None:
    """Two weight updates of the tiny model (1 task x 2 one-call episodes each), a checkpoint after each."""
    port = free_port()
    cmd = [*VIBE_RL, "swarm", "start", "--port", str(port), "--model", "tiny", "--config", "config.yaml",
           "--experiment-dir", str(exp)]
    for s in ("train.batch_size=1", "train.grpo_n=2", "train.save_freq=1", "train.lr=0.05", "rollout.max_tokens=8",
              "model.max_model_len=2048", "model.device=cpu"):
        cmd += ["--set", s]
    server = spawn(cmd, log, cwd=project)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, server, 120.0, log)
        with SwarmClient(url) as swarm:
            swarm.auto_sync_train_config_and_start_engine(TrainJob.from_yaml(project / "config.yaml"), verbose=False)
            for step, task in ((1, "t1"), (2, "t2")):
                for reward in (0.0, 1.0):
                    with swarm.episode(Task(task_id=task)) as ep:
                        ep.openai().chat.completions.create(model=ep.model, user="civilian:p1",
                                                            messages=[{"role": "user", "content": "describe it"}])
                        ep.end(WorkflowOutput(reward=reward))
                marker, deadline = exp / "checkpoints" / "latest.json", time.monotonic() + 300
                while not (marker.is_file() and json.loads(marker.read_text())["step"] >= step):
                    assert time.monotonic() < deadline, f"no checkpoint of step {step}: " + log.read_text()[-3000:]
                    time.sleep(0.1)
    finally:
        stop(server)


def spy_project(root: Path, **model: object) -> Path:
    """A Who-is-Spy project (4 players, one round, the tiny model and `model` settings) whose experiment
    (root/exp) holds step_000001 and step_000002."""
    project = copy_project("who_is_spy", root / "spy")
    config = yaml.safe_load((project / "config.yaml").read_text())
    config["model"].update(path="tiny", max_model_len=2048, **model)
    config["experiment"]["dir"] = str(root / "exp")
    (project / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    games = json.loads((project / "mock_game_dataset.json").read_text())
    for game in games:
        game.update(num_players=4, max_rounds=1)
    (project / "mock_game_dataset.json").write_text(json.dumps(games))
    train_two_steps(project, root / "exp", root / "train.log")
    assert available_steps(root / "exp" / "checkpoints") == [1, 2]
    return project


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_model_dir) -> Path:
    return spy_project(tmp_path_factory.mktemp("crossplay"))


def vibe_eval(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DASHSCOPE_API_KEY", "VIBE_RL_SWARM_TOKEN")}
    return subprocess.run([*VIBE_RL, "eval", *args], capture_output=True, text=True, timeout=900, env=env)


def test_a_cross_play_table_of_two_checkpoints(trained, tmp_path):
    out, work = tmp_path / "table.json", tmp_path / "work"
    done = vibe_eval(str(trained), "--checkpoints", "1", "latest", "--games", "2", "--parallel", "4", *FAST,
                     "--json", "--out", str(out), "--work-dir", str(work))
    assert done.returncode == 0, done.stderr[-4000:] + (work / "server.log").read_text()[-4000:]
    table = json.loads(done.stdout)
    assert json.loads(out.read_text()) == table
    assert [(r["label"], r["step"], r["model"]) for r in table["rows"]] == [("1", 1, "ckpt-1"), ("latest", 2, "ckpt-2")]
    assert table["cols"] == table["rows"] and (table["side"], table["side_roles"]) == ("civilian", ["civilian"])
    assert table["opponent_roles"] == ["spy"] and table["games"] == 2
    assert [len(line) for line in table["cells"]] == [2, 2]
    for i, line in enumerate(table["cells"]):
        for j, cell in enumerate(line):
            assert (cell["row"], cell["col"]) == (table["rows"][i]["model"], table["cols"][j]["model"])
            assert (cell["games"], cell["errors"], cell["undecided"]) == (2, 0, 0), cell
            assert 0.0 <= cell["lo"] <= cell["win_rate"] <= cell["hi"] <= 1.0
            assert cell["win_rate"] == cell["wins"] / 2

    # The server's records: eval episodes only, every call static; the civilians answered with the row's
    # checkpoint and the spy with the column's, two games per cell, the same tasks in every cell.
    db = sqlite3.connect(table["server_db"])
    assert db.execute("SELECT COUNT(*) FROM turns WHERE static = 0").fetchone()[0] == 0
    assert {s for (s,) in db.execute("SELECT status FROM episodes")} == {"eval"}
    by_episode: dict[str, dict[str, set[str]]] = {}
    for uuid, player, model in db.execute("SELECT episode_uuid, player, model FROM turns"):
        by_episode.setdefault(uuid, {}).setdefault(player.split(":")[0], set()).add(model)
    cells = Counter((min(roles["civilian"]), min(roles["spy"])) for roles in by_episode.values()
                    if len(roles["civilian"]) == len(roles["spy"]) == 1)
    named = ("ckpt-1@step_1", "ckpt-2@step_2")
    assert cells == {(a, b): 2 for a in named for b in named}
    tasks = Counter(t for (t,) in db.execute("SELECT task_id FROM episodes"))
    assert len(tasks) == 2 and set(tasks.values()) == {4}
    assert sorted(p.name for p in (work / "exp" / "checkpoints").iterdir()) == ["step_000001", "step_000002"]
    assert available_steps(Path(table["checkpoints_dir"])) == [1, 2]  # nothing written in the project's


def test_the_initial_model_against_a_column_of_its_own(trained, tmp_path):
    done = vibe_eval(str(trained), "-c", "initial", "--opponents", "initial,2", "-n", "1", *FAST,
                     "--work-dir", str(tmp_path / "w"))
    assert done.returncode == 0, done.stderr[-4000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("civilian win rate, 95% Wilson interval, 1 game(s) per cell")
    head, rule, row = lines[1:4]
    assert head.split()[-3:] == ["initial", "step", "2"]
    assert set(rule) <= {"-", " "} and row.startswith("initial") and row.count("n=1") == 2
    db = sqlite3.connect(tmp_path / "w" / "exp" / "swarm.sqlite")
    models = {m for (m,) in db.execute("SELECT model FROM turns WHERE player LIKE 'civilian:%'")}
    assert models == {"ckpt-initial"}
    assert {m for (m,) in db.execute("SELECT model FROM turns WHERE player LIKE 'spy:%'")} == \
        {"ckpt-initial", "ckpt-2@step_2"}


def test_lora_checkpoints_play_merged(tmp_path, tiny_model_dir):
    project = spy_project(tmp_path / "lora", lora={"rank": 4, "alpha": 8})
    steps = tmp_path / "lora" / "exp" / "checkpoints"
    assert (steps / "step_000002" / "adapter").is_dir() and not (steps / "step_000002" / "model").exists()
    done = vibe_eval(str(project), "-c", "latest", "--opponents", "initial", "-n", "1", *FAST, "--json",
                     "--work-dir", str(tmp_path / "w"))
    assert done.returncode == 0, done.stderr[-4000:] + (tmp_path / "w" / "server.log").read_text()[-4000:]
    cell = json.loads(done.stdout)["cells"][0][0]
    assert (cell["row"], cell["col"], cell["games"], cell["errors"]) == ("ckpt-2", "ckpt-initial", 1, 0)
    assert (steps / "step_000002" / "merged" / "config.json").is_file()  # the adapter merged into the tiny base
    db = sqlite3.connect(tmp_path / "w" / "exp" / "swarm.sqlite")
    assert {m for (m,) in db.execute("SELECT model FROM turns WHERE player LIKE 'civilian:%'")} == {"ckpt-2@step_2"}


def seat_lines(seats: dict[str, int]) -> str:
    """The entries of agent_run.py's ROLES table for `seats`."""
    return "".join(f'    "{role}": {n},\n' for role, n in seats.items())


def wolves_project(root: Path) -> Path:
    """The Werewolves project on the tiny model, its table cut to 4 seats (1 werewolf, 1 seer, 2 villagers) and
    its games to one day."""
    project = copy_project("werewolves", root / "wolves")
    config = yaml.safe_load((project / "config.yaml").read_text())
    config["model"].update(path="tiny", max_model_len=2048)
    (project / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    run = project / "agent_run.py"
    table = seat_lines({"werewolf": 3, "seer": 1, "witch": 1, "hunter": 1, "villager": 3})
    assert table in run.read_text()
    run.write_text(run.read_text().replace(table, seat_lines({"werewolf": 1, "seer": 1, "witch": 0, "hunter": 0,
                                                              "villager": 2})))
    games = json.loads((project / "mock_game_dataset.json").read_text())
    (project / "mock_game_dataset.json").write_text(json.dumps([game | {"max_days": 1} for game in games]))
    return project


def test_a_werewolves_table_seats_the_werewolves_on_the_rows(trained, tmp_path):
    """Werewolves trains two teams, each in its own episode; an eval game is one episode for every role, with the
    werewolves (the team the mode rewards) on the row's checkpoint and the seer and the village on the column's.
    The checkpoints are the tiny model's steps of `trained` (weights: whatever game trained them)."""
    project, work = wolves_project(tmp_path), tmp_path / "w"
    done = vibe_eval(str(project), "--experiment-dir", str(trained.parent / "exp"), "-c", "1", "latest", "-n", "1",
                     "--parallel", "4", *FAST, "--json", "--work-dir", str(work))
    assert done.returncode == 0, done.stderr[-4000:] + (work / "server.log").read_text()[-4000:]
    table = json.loads(done.stdout)
    assert (table["family"], table["side"], table["side_roles"]) == ("werewolves", "werewolf", ["werewolf"])
    assert table["opponent_roles"] == ["seer", "witch", "hunter", "villager"]
    assert [[(c["games"], c["errors"], c["undecided"]) for c in line] for line in table["cells"]] == [[(1, 0, 0)] * 2] * 2
    db = sqlite3.connect(table["server_db"])
    ends = [json.loads(m) for (m,) in db.execute("SELECT metadata_json FROM episodes WHERE status = 'eval'")]
    assert len(ends) == 4 and all(m["side"] == "werewolves" and m["win"] is (m["winner"] == "werewolves")
                                  for m in ends), ends
    assert all(Counter(m["roles"].values()) == {"werewolf": 1, "seer": 1, "villager": 2} for m in ends)
    assert db.execute("SELECT COUNT(*) FROM turns WHERE static = 0").fetchone()[0] == 0
    by_episode: dict[str, dict[str, set[str]]] = {}
    for uuid, player, model in db.execute("SELECT episode_uuid, player, model FROM turns"):
        by_episode.setdefault(uuid, {}).setdefault("werewolf" if player.startswith("werewolf:") else "other",
                                                   set()).add(model)
    named = ("ckpt-1@step_1", "ckpt-2@step_2")
    assert Counter((min(r["werewolf"]), min(r["other"])) for r in by_episode.values()
                   if len(r["werewolf"]) == len(r["other"]) == 1) == {(a, b): 1 for a in named for b in named}


def test_a_missing_step_names_the_available_ones(trained):
    done = vibe_eval(str(trained), "--checkpoints", "initial", "7", *FAST)
    assert done.returncode == 2 and "holds no step_000007" in done.stderr
    assert "Available steps: [1, 2]" in done.stderr


def test_a_project_without_checkpoints_is_refused(trained, tmp_path):
    done = vibe_eval(str(trained), "--experiment-dir", str(tmp_path / "empty"), *FAST)
    assert done.returncode == 2 and "No checkpoint in" in done.stderr and "train.save_freq" in done.stderr


def test_a_family_without_team_models_in_play_is_refused(tmp_path):
    project = copy_project("multi_model_translation", tmp_path / "translation")
    done = vibe_eval(str(project), "--checkpoints", "initial", "latest")
    assert done.returncode == 2, done.stderr
    assert "play(task, endpoints, team_models" in done.stderr and "who_is_spy" in done.stderr


def test_self_play_wiring_asks_for_the_side(tmp_path):
    project = copy_project("who_is_spy", tmp_path / "self")
    run = project / "agent_run.py"
    run.write_text(run.read_text().replace('"spy": "qwen-max"}', '"spy": "server1"}'))
    done = vibe_eval(str(project), "-c", "initial")  # the mode rewards the civilians: they are the rows
    assert done.returncode == 2 and "No checkpoint in" in done.stderr
    spec = json.loads((project / "task_spec.json").read_text())
    spec["modes"][0]["rewarded"] = {}
    (project / "task_spec.json").write_text(json.dumps(spec))
    done = vibe_eval(str(project), "-c", "initial")
    assert done.returncode == 2 and "Which side do the rows play?" in done.stderr and "--side ROLE" in done.stderr
    done = vibe_eval(str(project), "-c", "initial", "--side", "judge")
    assert done.returncode == 2 and "--side 'judge' is not a role" in done.stderr
    done = vibe_eval(str(project), "-c", "initial", "--side", "spy")  # the side is known: then the checkpoints
    assert done.returncode == 2 and "No checkpoint in" in done.stderr


def test_supported_families_are_the_ones_whose_play_takes_team_models():
    """The refusal names SUPPORTED: it must be the families whose agent_run template has play(..., team_models)
    and output(game, role)."""
    from vibe_rl.autopilot.crossplay import SUPPORTED

    found = []
    for template in sorted((REPO / "templates").glob("*/project/agent_run.py.j2")):
        text = template.read_text()
        play = text.partition("def play(")[2].partition(")")[0]
        if "team_models" in play and "def output(" in text:
            found.append(template.parents[1].name)
    assert tuple(found) == SUPPORTED


def test_resolve_forms_and_refusals(tmp_path):
    picks = resolve(["initial", "step_2", "latest", "2", " 1 "], [1, 2], tmp_path)
    assert [(p.label, p.step, p.model, p.title) for p in picks] == [
        ("initial", 0, "ckpt-initial", "initial"), ("2", 2, "ckpt-2", "step 2"), ("1", 1, "ckpt-1", "step 1")]
    with pytest.raises(CrossPlayError, match=r"'best' is not one of 'initial'.*available steps: \[1, 2\]"):
        resolve(["best"], [1, 2], tmp_path)
    with pytest.raises(CrossPlayError, match="No checkpoint in"):
        resolve(["latest"], [], tmp_path)
