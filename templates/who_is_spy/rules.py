"""Offline rules for the who_is_spy family."""

from __future__ import annotations

import re

from vibe_rl.planner.facts import Facts
from vibe_rl.scaffold.families import Manifest
from vibe_rl.schema.job import StaticModel
from vibe_rl.schema.spec import Constraints, Mode, RewardScheme, Server, TaskSpec, Team, Training

SPY_WORDS = r"卧底|间谍|spies|spy|undercover"
CIVILIAN_WORDS = r"平民|村民|civilians?|villagers?"


def _count(pattern: str, text: str) -> int | None:
    found = re.search(pattern, text, re.IGNORECASE)
    return int(found.group(1)) if found else None


def _side_of(text: str, position: int) -> str | None:
    """The team named last in the 60 characters before a model is mentioned."""
    window = text[max(0, position - 60):position]
    hits = [(m.end(), "spies") for m in re.finditer(SPY_WORDS, window, re.IGNORECASE)]
    hits += [(m.end(), "civilians") for m in re.finditer(CIVILIAN_WORDS, window, re.IGNORECASE)]
    return max(hits)[1] if hits else None


def build(facts: Facts, manifest: Manifest) -> TaskSpec:
    text, notes = facts.text, []
    game = {}
    players = _count(r"(\d+)\s*(?:名|个|位)?\s*(?:玩家|players?\b|人局|-player)", text)
    spies = _count(r"(\d+)\s*(?:名|个|位)?\s*(?:卧底|spies\b|spy\b)", text)
    if players:
        game["num_players"] = players
    if spies:
        game["num_spies"] = spies
    game = manifest.resolve_parameters(game)
    if not players:
        notes.append(f"Players per game not given as a number: using {game['num_players']}.")

    # Which team plays a static model in agent_roll: the one named next to the model.
    static = None
    for position, model in facts.static_models:
        side = _side_of(text, position) or "spies"
        if static is None or side == "spies":
            static = (side, model)
    if static is None:
        static = ("spies", StaticModel(name="opponent"))
        notes.append("No opponent model named: spies play 'opponent', a frozen local copy of the trainable model.")
    static_side, static_model = static
    trained_side = "civilians" if static_side == "spies" else "spies"

    model_path = facts.model_path or "tiny"
    if not facts.model_path:
        notes.append("No base model path found: using the tiny offline model ('tiny').")
    total = facts.total_gpus or 1
    roll_gpus = facts.mode_gpus.get("agent_roll", total)
    adv_gpus = facts.mode_gpus.get("agent_roll_adv", max(total // 2, 1))
    if facts.grpo_n is None:
        notes.append("GRPO group size not given: using grpo_n = 4.")

    training = Training(batch_size=facts.batch_size or 16, grpo_n=facts.grpo_n or 4)
    if facts.lr:
        training.lr = facts.lr
    if facts.save_freq is not None:
        training.save_freq = facts.save_freq
    servers = [
        Server(name="server1", port=10086, model_path=model_path, gpus=roll_gpus, config="config.yaml",
               url_env="VIBE_RL_SWARM_URL", static_models=[static_model.name]),
        Server(name="server2", port=10087, model_path=model_path, gpus=adv_gpus, config="config_server2.yaml",
               url_env="VIBE_RL_SWARM_URL_2"),
    ]
    teams = [
        Team(name="civilians", roles=["civilian"], model="server1" if trained_side == "civilians" else static_model.name),
        Team(name="spies", roles=["spy"], model="server1" if trained_side == "spies" else static_model.name),
    ]
    modes = [
        Mode(name="agent_roll", script="agent_roll.py", run_file="agent_run.py", servers=["server1"],
             rewarded={"server1": trained_side}, gpus={"server1": roll_gpus}),
        Mode(name="agent_roll_adv", script="agent_roll_adv.py", run_file="agent_run_adv.py",
             servers=["server1", "server2"], teams={"civilians": "server1", "spies": "server2"},
             rewarded={"server1": "civilians", "server2": "spies"}, gpus={"server1": adv_gpus, "server2": adv_gpus}),
    ]
    win = facts.win if facts.win is not None else 1.0
    loss = facts.loss if facts.loss is not None else 0.0
    return TaskSpec(
        family=manifest.name, name=manifest.name, short_name=manifest.short_name,
        title="Who is Spy: GRPO self-play",
        description=(f"Train the {trained_side} of Who is Spy ({model_path}) against {static_model.name} "
                     f"(agent_roll), and both teams against each other on two servers (agent_roll_adv)."),
        gpus=total, game=game, teams=teams, servers=servers, static_models=[static_model], training=training, modes=modes,
        reward=RewardScheme(win=win, loss=loss, description=f"win {win:g}, loss {loss:g}"),
        constraints=Constraints(no_chinese_in_code=True, random_ids_and_names=True),
        notes=notes,
    )
