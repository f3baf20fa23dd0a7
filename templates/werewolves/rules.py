"""Offline rules for the werewolves family.

Which roles train and which play a static model is read clause by clause: a clause naming roles together
with "trainable / share" puts them on the trainable server; a clause naming roles with "static / frozen" or
a known static model puts them on that model. Defaults follow the seed: werewolves and seer train, the
witch, hunter and villagers play the static model.
"""

from __future__ import annotations

import re

from vibe_rl.planner.facts import Facts
from vibe_rl.scaffold.families import Manifest
from vibe_rl.schema.job import StaticModel
from vibe_rl.schema.spec import Constraints, Mode, RewardScheme, Server, TaskSpec, Team, Training

ROLE_WORDS = {
    "werewolf": r"狼人(?!杀)|werewol(?:f|ves)",
    "seer": r"预言家|\bseers?\b",
    "witch": r"女巫|\bwitch(?:es)?\b",
    "hunter": r"猎人|\bhunters?\b",
    "villager": r"平民|村民|\bvillagers?\b",
}
ROLES = list(ROLE_WORDS)
TRAINABLE_WORDS = r"可训练|共享|trainable|\bshare[sd]?\b"
STATIC_WORDS = r"静态|冻结|\bstatic\b|\bfrozen\b"
SIDE_RULE_WORDS = r"屠边|all (?:the )?gods|every god|all villagers or all gods"
DEFAULT_TRAINABLE = ["werewolf", "seer"]


def _and(words: list[str]) -> str:
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else "".join(words)


def roles_in(line: str) -> list[str]:
    return [role for role, pattern in ROLE_WORDS.items() if re.search(pattern, line, re.IGNORECASE)]


def split_roles(facts: Facts) -> tuple[list[str], list[str]]:
    """(trainable roles, static roles) in seat-table order."""
    trainable: set[str] = set()
    static: set[str] = set()
    names = [m.name.lower() for _, m in facts.static_models]
    for line in re.split(r"\n|[;\u3002\uff1b]|\.(?=\s)", facts.text):  # clauses: lines, sentences, semicolons
        roles, lower = roles_in(line), line.lower()
        if not roles:
            continue
        if re.search(STATIC_WORDS, line, re.IGNORECASE) or any(name in lower for name in names):
            static.update(roles)
        elif re.search(TRAINABLE_WORDS, line, re.IGNORECASE):
            trainable.update(roles)
    if not trainable:
        trainable = set(DEFAULT_TRAINABLE) - static
    return [r for r in ROLES if r in trainable], [r for r in ROLES if r not in trainable]


def opponent(facts: Facts, notes: list[str]) -> StaticModel:
    """The static model; an env var named *_BASE_URL in the spec replaces a fixed URL."""
    if facts.static_models:
        model = facts.static_models[0][1].model_copy()
    else:
        model = StaticModel(name="opponent")
        notes.append("No static model named: the static roles play 'opponent', a frozen local copy of the "
                     "trainable model.")
    url_env = re.search(r"\b([A-Z][A-Z0-9_]*_BASE_URL)\b", facts.text)
    if url_env:
        model.base_url, model.base_url_env = None, url_env.group(1)
    keys = re.findall(r"\b([A-Z][A-Z0-9_]*_API_KEY)\b", facts.text)
    if keys and model.api_key_env is None:
        model.api_key_env = keys[0]
    return model


def teams_for(trainable: list[str], static: list[str], static_name: str) -> list[Team]:
    """One team per trainable side (its own episode and reward) plus the static roles by side."""
    teams = []
    if "werewolf" in trainable:
        teams.append(Team(name="werewolves", roles=["werewolf"], model="server1"))
    village = [r for r in trainable if r != "werewolf"]
    if village:
        teams.append(Team(name="seer" if village == ["seer"] else "village", roles=village, model="server1"))
    taken = {t.name for t in teams}
    for side, roles in (("werewolves", [r for r in static if r == "werewolf"]),
                        ("village", [r for r in static if r != "werewolf"])):
        if roles:
            teams.append(Team(name=side if side not in taken else f"{side}_static", roles=roles, model=static_name))
    return teams


def build(facts: Facts, manifest: Manifest) -> TaskSpec:
    notes: list[str] = []
    game = {"win_rule": "side"} if re.search(SIDE_RULE_WORDS, facts.text, re.IGNORECASE) else {}
    game = manifest.resolve_parameters(game)
    trainable, static = split_roles(facts)
    model = opponent(facts, notes)
    teams = teams_for(trainable, static, model.name)
    model_path = facts.model_path or "tiny"
    if not facts.model_path:
        notes.append("No base model path found: using the tiny offline model ('tiny').")
    gpus = facts.mode_gpus.get("agent_roll", facts.total_gpus or 1)
    training = Training(batch_size=facts.batch_size or 32, grpo_n=facts.grpo_n or 6, temperature=0.7,  # the seed's
                        save_freq=facts.save_freq if facts.save_freq is not None else 5)
    if facts.lr:
        training.lr = facts.lr
    for value, default, what in ((facts.batch_size, 32, "batch size"), (facts.grpo_n, 6, "grpo_n (num_repeat)")):
        if value is None:
            notes.append(f"No {what} given: using the seed's {default}.")
    if len([t for t in teams if t.model == "server1"]) > 1:
        notes.append("The trainable teams sit on opposite sides: each game opens one episode per team on server1, "
                     "rewarded for that team's side (GRPO groups '<seed>-<team>').")
    server = Server(name="server1", port=10086, model_path=model_path, gpus=gpus, config="config.yaml",
                    url_env="VIBE_RL_SWARM_URL", static_models=[model.name] if static else [])
    win = facts.win if facts.win is not None else 1.0
    loss = facts.loss if facts.loss is not None else 0.0
    return TaskSpec(
        family=manifest.name, name=manifest.name, short_name=manifest.short_name,
        title="Werewolves: GRPO with a shared werewolf/seer model",
        description=(f"Train the {_and(trainable)} of a 9-player Werewolves game on one shared model "
                     f"({model_path}) against the {_and(static) or 'nobody'} played by {model.name}."),
        gpus=facts.total_gpus or gpus, game=game, teams=teams, servers=[server],
        static_models=[model] if static else [], training=training,
        modes=[Mode(name="agent_roll", script="agent_roll.py", run_file="agent_run.py", servers=["server1"],
                    rewarded={"server1": teams[0].name}, gpus={"server1": gpus})],
        reward=RewardScheme(win=win, loss=loss, description=f"win {win:g}, loss {loss:g} (per side)"),
        constraints=Constraints(no_chinese_in_code=True, random_ids_and_names=True),
        notes=notes,
    )
