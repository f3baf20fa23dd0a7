"""The Werewolves family end to end: planner values from the example specs, the committed generated project
(kept in sync with the templates), lint, doctor (clean, and catching an injected wiring mistake), and one full
episode against a real swarm server on loopback with the tiny model."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from helpers.scripted_api import Answer, Refusal, ScriptedAPI, ToolCall
from project_kit import (
    REPO,
    VIBE_RL,
    assert_matches_the_templates,
    copy_project,
    pytest_inside,
    ruff_check,
    sessions_without_hash,
    start_server,
    stop_server,
)

from vibe_rl.planner.offline import OfflinePlanner
from vibe_rl.scaffold.doctor import diagnose

EXAMPLES = REPO / "templates" / "werewolves" / "examples"
SEED = EXAMPLES / "seed_prompt.zh.md"
PROJECT = REPO / "generated" / "werewolves"
MODEL = "/mnt/data_cpfs/model_cache/modelscope/hub/Qwen/Qwen/Qwen2.5-7B-Instruct"
STATIC = "Qwen3-235B-A22B"


@pytest.fixture
def project(tmp_path) -> Path:
    return copy_project(PROJECT, tmp_path)


# ---- planner -------------------------------------------------------------------------------------

@pytest.mark.parametrize("prompt", ["seed_prompt.zh.md", "seed_prompt.en.md"])
def test_example_specs_give_the_seed_values(prompt):
    spec = OfflinePlanner().plan((EXAMPLES / prompt).read_text(encoding="utf-8"))
    assert (spec.family, spec.short_name, spec.gpus) == ("werewolves", "wolf", 8)
    t = spec.training
    assert (t.batch_size, t.grpo_n, t.save_freq) == (32, 6, 5)
    (server,) = spec.servers
    assert (server.model_path, server.port, server.gpus, server.config) == (MODEL, 10086, 8, "config.yaml")
    for role in ("werewolf", "seer"):
        wired = spec.model_for_role(role)
        assert (wired.kind, wired.name) == ("server", "server1"), role
    for role in ("witch", "hunter", "villager"):
        wired = spec.model_for_role(role)
        assert (wired.kind, wired.name, wired.server) == ("static", STATIC, "server1"), role
    (static,) = spec.static_models
    assert (static.base_url, static.base_url_env, static.api_key_env) == (None, "OPPONENT_BASE_URL", "OPPONENT_API_KEY")
    assert [t.name for t in spec.teams] == ["werewolves", "seer", "village"]
    assert spec.game["win_rule"] == "parity"
    assert (spec.reward.win, spec.reward.loss) == (1.0, 0.0) and spec.constraints.no_chinese_in_code
    assert sessions_without_hash(spec) == ["wolf-swarm-server", "wolf-swarm-client"]
    assert spec.gpu_split() == {"server1": list(range(8))}


def test_chinese_and_english_examples_agree():
    zh, en = (OfflinePlanner().plan((EXAMPLES / f).read_text(encoding="utf-8"))
              for f in ("seed_prompt.zh.md", "seed_prompt.en.md"))
    assert zh == en


def test_other_phrasing_picks_roles_models_and_numbers():
    spec = OfflinePlanner().plan(
        "Werewolves with the usual 9 roles. The villagers and the witch share one trainable model "
        "Qwen/Qwen2.5-3B-Instruct; the werewolves, the seer and the hunter are played by gpt-4o-mini. "
        "2 GPUs, batch size 8, grpo_n 4, save_freq 10. The werewolves win when all gods are dead.")
    roles = {r: spec.model_for_role(r).name for r in ("werewolf", "seer", "witch", "hunter", "villager")}
    assert roles == {"werewolf": "gpt-4o-mini", "seer": "gpt-4o-mini", "hunter": "gpt-4o-mini",
                     "witch": "server1", "villager": "server1"}
    assert spec.servers[0].model_path == "Qwen/Qwen2.5-3B-Instruct" and spec.servers[0].gpus == 2
    assert (spec.training.batch_size, spec.training.grpo_n, spec.training.save_freq) == (8, 4, 10)
    assert spec.game["win_rule"] == "side"
    assert {t.name: t.model for t in spec.teams} == {"village": "server1", "werewolves": "gpt-4o-mini",
                                                      "village_static": "gpt-4o-mini"}


def test_three_trainable_roles_are_listed_as_prose(tmp_path):
    """Three trainable roles read 'the seer, witch and villager' in the readme and agent_run.py's docstring
    (they read 'the seer and witch and villager')."""
    from vibe_rl.scaffold import render_project
    spec = OfflinePlanner().plan(
        "Werewolves, 9 players. The seer, the witch and the villagers share one trainable model /ckpt/q7; the "
        "werewolves and the hunter are played by a static qwen-max. Batch size 8, grpo_n 4.")
    assert [t.roles for t in spec.teams if t.model == "server1"] == [["seer", "witch", "villager"]]
    render_project(spec, tmp_path / "p")
    readme, run = (tmp_path / "p" / "readme.md").read_text(), (tmp_path / "p" / "agent_run.py").read_text()
    assert "Only the seer, witch and villager train:" in readme
    assert "calls of the\nseer, witch and villager (static roles" in run
    assert "seer and witch and villager" not in readme + run


def test_who_is_spy_seed_still_picks_who_is_spy():
    text = (REPO / "templates" / "who_is_spy" / "examples" / "seed_prompt.zh.md").read_text(encoding="utf-8")
    assert OfflinePlanner().plan(text).family == "who_is_spy"


# ---- the committed project -----------------------------------------------------------------------

def test_generated_werewolves_matches_the_templates(tmp_path):
    assert_matches_the_templates(PROJECT, SEED, tmp_path)


def test_roll_is_short_and_ruff_clean():
    assert len((PROJECT / "agent_roll.py").read_text().splitlines()) < 100
    done = ruff_check(PROJECT)
    assert done.returncode == 0, done.stdout + done.stderr


def test_rule_tests_pass_inside_the_project(project):
    done = pytest_inside(project, "test_game_engine.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "28 passed" in done.stdout


def test_dataset_task_ids_are_unique_seeds():
    games = json.loads((PROJECT / "mock_game_dataset.json").read_text())
    seeds = [str(g["seed"]) for g in games]
    assert len(games) == 200 and all(s.strip() for s in seeds) and len(set(seeds)) == len(seeds)


def test_doctor_passes_and_catches_injected_wiring_mistakes(project):
    assert [f for f in diagnose(PROJECT) if f.level == "error"] == []
    run = project / "agent_run.py"
    text = run.read_text()
    run.write_text(text.replace('"seer": "server1"', f'"seer": "{STATIC}"'))
    errors = [f for f in diagnose(project) if f.level == "error"]
    assert len(errors) == 1 and errors[0].file == "agent_run.py" and "seer" in errors[0].message
    assert 'TEAM_MODELS["seer"] = "server1"' in errors[0].fix
    run.write_text(text.replace('"villager": "Qwen3-235B-A22B"', '"villager": "server1"'))
    errors = [f for f in diagnose(project) if f.level == "error"]
    assert len(errors) == 1 and "villager" in errors[0].message
    done = subprocess.run([VIBE_RL, "doctor", str(project)], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "villager" in done.stdout + done.stderr


# ---- one episode against scripted players (no model): choices, fallbacks, context shrinking -------

class ScriptedPlayers:
    """OpenAI-compatible players. Werewolves and seer choose the first option with a tool call; the others
    name it in plain text. A prompt showing more than MAX_EVENTS public events is refused as too long."""

    MAX_EVENTS = 6

    def __init__(self, garbled: tuple[str, ...] = ()):
        self.refused, self.garbled = 0, garbled  # roles whose choices name no option

    def __call__(self, body: dict) -> Answer:
        prompt = body["messages"][-1]["content"]
        events = prompt.split("Public events:\n")[1].split("\nYour private notes:")[0].splitlines()
        if len(events) > self.MAX_EVENTS:
            self.refused += 1
            return Refusal(400, {"error": {"message": "This model's maximum context length is 64 tokens",
                                           "type": "invalid_request_error", "code": "context_length_exceeded"}})
        if not body.get("tools"):
            return "I trust player nobody."
        if body["user"].split(":")[0] in self.garbled:
            return ToolCall("choose", {"choice": "the quiet one"})
        first = prompt.split("Options: ")[1].split(", ")[0].split(".")[0]
        if body["user"].split(":")[0] in ("werewolf", "seer"):
            return ToolCall("choose", {"choice": first})
        return f"My choice is {first}."


SCRIPTED_DRIVER = """
import json, sys
from vibe_rl.swarm import OpenaiBaseUrlAndApiKey
from agent_roll import load_tasks
from agent_run import run_episode
task = load_tasks()[3]
creds = {team: OpenaiBaseUrlAndApiKey(base_url=sys.argv[1], api_key=f"key-{team}", model="trainable")
         for team in ("werewolves", "seer")}
print(json.dumps({k: v.model_dump() for k, v in run_episode(task, creds, seed=5).items()}))
"""


def test_scripted_episode_parses_choices_and_shrinks_long_prompts(project):
    players = ScriptedPlayers()
    with ScriptedAPI(players) as api:
        done = subprocess.run([sys.executable, "-c", SCRIPTED_DRIVER, api.url], cwd=project, capture_output=True,
                              text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    outputs = json.loads(done.stdout.strip().splitlines()[-1])
    info = outputs["werewolves"]["metadata"]
    assert info["winner"] in ("werewolves", "village") and info["fallbacks"] == 0 and info["invalid_actions"] == 0
    assert {outputs["werewolves"]["reward"], outputs["seer"]["reward"]} == {0.0, 1.0}
    assert all(o["metadata"]["win"] is (o["reward"] == 1.0) for o in outputs.values())  # eval/win_rate counts it
    assert players.refused > 0  # long prompts were refused, then retried with fewer events and answered
    # The werewolves' and the seer's calls use their own episode keys; the static village roles go through the
    # episode of the trainable team on their side (the seer's), which keeps it busy after the seer dies.
    routes = {(r["user"].split(":")[0], r["model"], auth) for r, auth in zip(api.requests, api.auth, strict=True)}
    assert {"werewolf", "seer", "witch", "villager"} <= {role for role, _, _ in routes}
    for role, model, auth in routes:
        if role in ("werewolf", "seer"):
            assert (model, auth) == ("trainable", f"Bearer key-{'werewolves' if role == 'werewolf' else 'seer'}")
        else:
            assert (model, auth) == (STATIC, "Bearer key-seer")


ONE_EPISODE_DRIVER = """
import json, sys
from vibe_rl.swarm import OpenaiBaseUrlAndApiKey
from agent_roll import load_tasks
from agent_run import TEAM_MODELS, output, play
task = load_tasks()[3]
creds = {"server1": OpenaiBaseUrlAndApiKey(base_url=sys.argv[1], api_key="key-eval", model="trainable")}
models = {role: "ckpt-1" if role == "werewolf" else "ckpt-2" for role in TEAM_MODELS}
played = play(task, creds, models, seed=5)
sides = {role: output(played, role).model_dump() for role in ("werewolf", "seer", "villager")}
played.game.winner = "draw"  # the day limit's end
print(json.dumps({"sides": sides, "draw": {role: output(played, role).model_dump() for role in ("werewolf", "seer")}}))
"""


def test_play_with_one_episode_and_rewired_models_and_output_per_side(project):
    """`vibe-rl eval`'s contract: play(task, {server: one episode}, team_models) routes every role's call through
    that episode, to the model team_models names; output(played, role) pays `role`'s side and sets a bool `win`
    (a draw is nobody's)."""
    with ScriptedAPI(ScriptedPlayers()) as api:
        done = subprocess.run([sys.executable, "-c", ONE_EPISODE_DRIVER, api.url], cwd=project, capture_output=True,
                              text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    routes = {(r["user"].split(":")[0], r["model"], auth) for r, auth in zip(api.requests, api.auth, strict=True)}
    assert {"werewolf", "seer", "villager"} <= {role for role, _, _ in routes}
    assert all((model, auth) == ("ckpt-1" if role == "werewolf" else "ckpt-2", "Bearer key-eval")
               for role, model, auth in routes), routes
    sides = result["sides"]
    winner = sides["werewolf"]["metadata"]["winner"]
    assert winner in ("werewolves", "village")
    game = [{k: v for k, v in out["metadata"].items() if k not in ("side", "win")} for out in sides.values()]
    assert game[0] == game[1] == game[2]  # one game, seen from each side
    for role, out in sides.items():
        side = "werewolves" if role == "werewolf" else "village"
        assert out["metadata"]["side"] == side and out["metadata"]["win"] is (winner == side)
        assert out["reward"] == (1.0 if winner == side else 0.0)
    for out in result["draw"].values():
        assert (out["reward"], out["metadata"]["win"], out["metadata"]["winner"]) == (0.0, False, "draw")


def scripted_episode(project: Path) -> tuple[dict, set[str]]:
    """One episode of `project` against ScriptedPlayers: (the werewolves' episode metadata, system prompts)."""
    with ScriptedAPI(ScriptedPlayers()) as api:
        done = subprocess.run([sys.executable, "-c", SCRIPTED_DRIVER, api.url], cwd=project, capture_output=True,
                              text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    info = json.loads(done.stdout.strip().splitlines()[-1])["werewolves"]["metadata"]
    return info, {r["messages"][0]["content"] for r in api.requests}


def test_edited_seat_table_is_what_agent_run_seats_and_prompts(project):
    """ROLES in agent_run.py is the table (the plan's game.roles): edited by hand, agent_run.py must seat that many
    players (it once sat a hard-coded 9: 'Game.deal' refused 9 names for 7 roles) and its system prompt must name
    the new table and leave out the powers of roles without a seat."""
    run = project / "agent_run.py"
    source = run.read_text()
    default = '"werewolf": 3,\n    "seer": 1,\n    "witch": 1,\n    "hunter": 1,\n    "villager": 3,'
    assert default in source and "roles=ROLES" in source
    run.write_text(source.replace(default, default.replace('"werewolf": 3', '"werewolf": 2').replace('"hunter": 1',
                                                                                                     '"hunter": 0')))
    info, systems = scripted_episode(project)
    assert Counter(info["roles"].values()) == {"werewolf": 2, "seer": 1, "witch": 1, "villager": 3}
    assert systems and all("Werewolves with 7 players: 2 werewolves, 1 seer, 1 witch and 3 villagers." in text
                           and "hunter" not in text for text in systems), sorted(systems)[:1]


def test_six_player_table_renders_and_agent_run_seats_six(tmp_path):
    """A spec's own table ('6 players: 2 werewolves, a seer, 3 villagers, no witch or hunter') is planned into
    game.roles, rendered into agent_run.py's ROLES and the readme, and an episode deals exactly those 6 seats."""
    from vibe_rl.scaffold import render_project
    spec = OfflinePlanner().plan(
        "Werewolves, 6 players: 2 werewolves, a seer, 3 villagers, no witch or hunter. The werewolves and the seer "
        "share the trainable model; the villagers are a frozen opponent. Batch size 4, grpo_n 2.")
    table = {"werewolf": 2, "seer": 1, "witch": 0, "hunter": 0, "villager": 3}
    assert spec.game["roles"] == table and spec.unparsed == []
    assert "6-player Werewolves game" in spec.description
    project = tmp_path / "wolf6"
    render_project(spec, project)
    run, readme = (project / "agent_run.py").read_text(), (project / "readme.md").read_text()
    assert "ROLES = {\n" + "".join(f'    "{r}": {n},\n' for r, n in table.items()) + "}" in run
    assert "6 players: 2 werewolves, 1 seer and 3 villagers." in readme and "a role with no seat never acts" in readme
    rules = readme[readme.index("- Night:"):readme.index("Actions are")]
    assert "seer" in rules and "witch" not in rules and "hunter" not in rules, rules  # only seated roles' powers
    assert ruff_check(project).returncode == 0
    assert [f for f in diagnose(project) if f.level == "error"] == []
    info, systems = scripted_episode(project)
    assert len(info["roles"]) == 6 and Counter(info["roles"].values()) == {"werewolf": 2, "seer": 1, "villager": 3}
    assert info["winner"] in ("werewolves", "village") and info["invalid_actions"] == 0
    assert systems and all("Werewolves with 6 players: 2 werewolves, 1 seer and 3 villagers. Each night the "
                           "werewolves attack a player and the seer learns whether one player is a werewolf. Each day"
                           in text for text in systems), sorted(systems)[:1]


# ---- one full episode against a real swarm server -------------------------------------------------

DRIVER = """
import json, sys
from vibe_rl.swarm import SwarmClient, TrainJob
from agent_roll import load_tasks
from agent_run import EPISODE_ROLES, run_episode
swarm = SwarmClient(sys.argv[1])
swarm.auto_sync_train_config_and_start_engine(TrainJob.from_yaml("config.yaml"), verbose=False)
task = load_tasks()[0]
opened = {team: swarm.begin_episode(discard_episode_timeout=600, group=f"{task.task_id}/{team}") for team in EPISODE_ROLES}
outputs = run_episode(task, {team: creds for team, (_, creds) in opened.items()}, seed=11)
ended = {team: swarm.end_episode(task, uuid, outputs[team]) for team, (uuid, _) in opened.items()}
print(json.dumps({"task": task.task_id, "outputs": {k: v.model_dump() for k, v in outputs.items()}, "ended": ended,
                  "uuids": {team: uuid for team, (uuid, _) in opened.items()}, "status": swarm.get_engine_status(),
                  "traces": swarm.get_traces(limit=2000)["calls"]}))
"""


@pytest.mark.slow
def test_one_episode_against_a_real_swarm_server(project, tmp_path, tiny_model_dir):
    proc, url = start_server(tmp_path, "server1", 16, 1024, config=project / "config.yaml")
    try:
        done = subprocess.run([sys.executable, "-c", DRIVER, url], cwd=project, capture_output=True, text=True,
                              timeout=900, env={**os.environ, "VIBE_RL_MAX_TOKENS": "16"})
    finally:
        stop_server(proc)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    wolves, seer = result["outputs"]["werewolves"], result["outputs"]["seer"]
    winner = wolves["metadata"]["winner"]
    assert winner in {"werewolves", "village", "draw"}
    roles = wolves["metadata"]["roles"]
    assert sorted(Counter(roles.values()).items()) == [("hunter", 1), ("seer", 1), ("villager", 3),
                                                        ("werewolf", 3), ("witch", 1)]
    for out in (wolves, seer):
        assert math.isfinite(out["reward"]) and out["reward"] in (0.0, 1.0)
    assert wolves["reward"] == (1.0 if winner == "werewolves" else 0.0)
    assert seer["reward"] == (1.0 if winner == "village" else 0.0)
    assert all(not e["already_ended"] for e in result["ended"].values())
    # Each trainable team's calls sit in its own episode, on the trainable model; the others reach the static model.
    calls = [c for c in result["traces"] if c["episode_uuid"] in result["uuids"].values()]
    team_of = {uuid: team for team, uuid in result["uuids"].items()}
    seen = Counter()
    for call in calls:
        role, pid = call["player"].split(":")
        assert roles[pid] == role
        if role in ("werewolf", "seer"):
            assert not call["static"] and call["model"] != STATIC
            assert team_of[call["episode_uuid"]] == ("werewolves" if role == "werewolf" else "seer")
        else:
            assert call["static"] and call["model"] == STATIC and team_of[call["episode_uuid"]] == "seer"
        seen[role] += 1
    assert seen["werewolf"] > 0 and seen["seer"] > 0 and seen["villager"] > 0
    tasks = {t["task_id"]: t for t in result["status"]["tasks"]}
    assert tasks[f"{result['task']}/werewolves"]["reward_mean"] == pytest.approx(wolves["reward"], abs=1e-3)
    assert tasks[f"{result['task']}/seer"]["reward_mean"] == seer["reward"]


def test_trainable_roles_naming_no_option_abstain_and_static_roles_fall_back(project):
    """The documented rule (write-swarm-client, 'Unparseable answers'): a trainable seat's answer with no legal
    option is its own mistake, a lost vote or action, never a move picked for it; a static seat falls back."""
    for garbled, invalid, fallbacks in ((("werewolf", "seer"), True, False), (("witch", "hunter", "villager"), False, True)):
        with ScriptedAPI(ScriptedPlayers(garbled)) as api:
            done = subprocess.run([sys.executable, "-c", SCRIPTED_DRIVER, api.url], cwd=project, capture_output=True,
                                  text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        info = json.loads(done.stdout.strip().splitlines()[-1])["werewolves"]["metadata"]
        assert (info["invalid_actions"] > 0, info["fallbacks"] > 0) == (invalid, fallbacks), (garbled, info)
