"""Offline planner rules of the werewolves family (loaded by file path; `build(facts, manifest) -> TaskSpec`).

The family seats 9 fixed players (3 werewolves, seer, witch, hunter, 3 villagers): counts that match are
read, counts that differ are left for `unparsed`. Which roles train and which play a static model is read
per clause segment (split at commas): a segment naming roles with "trainable / share" puts them on the
trainable server; one with "static / frozen / played by" or a static model's name puts them on that model;
a segment naming roles without either takes the next segment's side ("the hunter, the witch and the
villagers are played by ..."). With no such statement the seed's split is used (and noted).
"""

from __future__ import annotations

import re

from vibe_rl.planner.common import (
    constraints,
    first_given,
    game_parameter,
    no_model_path,
    planned_modes,
    reward,
    short_name,
    static_endpoint,
    static_note,
    training,
)
from vibe_rl.planner.facts import Facts
from vibe_rl.planner.text import NUM, to_int
from vibe_rl.scaffold.families import Manifest
from vibe_rl.schema.job import StaticModel
from vibe_rl.schema.spec import Mode, Server, TaskSpec, Team

ROLE_WORDS = {
    "werewolf": r"狼人(?!杀)|狼(?![人杀])|werewol(?:f|ves)",
    "seer": r"预言家|\bseers?\b",
    "witch": r"女巫|\bwitch(?:es)?\b",
    "hunter": r"猎人|\bhunters?\b",
    "villager": r"平民|村民|\bvillagers?\b",
}
SEATS = {"werewolf": 3, "seer": 1, "witch": 1, "hunter": 1, "villager": 3}
ROLES = list(ROLE_WORDS)
TRAINABLE_WORDS = (r"可训练|共享|训练(?!目标)|trainable|\bshare[sd]?\b|\b(?:are|is|get) trained\b|"
                   r"\btrain(?:s|ing)?\b(?! (?:for|until|on|goals?)\b)")
STATIC_WORDS = r"静态|冻结|\bstatic\b|\bfrozen\b"
PLAYED_BY_WORDS = r"扮演|驱动|控制|played by|\bplay(?:s|ed)? (?:by|with)\b|controlled by|\buses?\b|使用"
SIDE_RULE_WORDS = r"屠边|all (?:the )?gods|every god|all villagers or all gods"
PARITY_WORDS = (r"(?:>=|≥|不少于|大于等于|at least as many as)\s*(?:the )?(?:其余|其他|other|the others|remaining)|"
                r"\b(?:equal|match|outnumber)(?:s|es)?\b(?: (?:in number|the number of))?|人数相等|持平|parity")
OTHER_ROLES = (r"守卫|白痴|丘比特|骑士|警长|白狼王|狼王|混血儿|\b(?:body)?guard\b|\bidiot\b|\bcupid\b|\bknight\b|"
               r"\bdoctor\b|\bbodyguard\b|\bsheriff\b|\bwolf king\b|\bwhite wolf\b")
DEFAULT_TRAINABLE = ["werewolf", "seer"]
# "Werewolves" as the game's name, not the role: at the start of the spec or a line ("Werewolves with the seer
# trainable", "# Werewolf RL"), or with a game word ("a werewolf game", "the game of werewolves").
_WOLF = r"werewol(?:f|ves|fs)"
GAME_NAME = (rf"^[\s#*-]*(?:the\s+)?({_WOLF})(?=\s+(?:with|on|for|using|in|via|game|rl|training|self-play|"
             rf"agents?|project)\b|\s*[:(.;：（]|\s*$)"
             rf"|({_WOLF})(?=\s+(?:game|rl|self-play|environment|env)\b)"
             rf"|(?:game|round|rounds)\s+of\s+(?:the\s+)?({_WOLF})\b"
             rf"|(?<=[:：])\s*({_WOLF})(?=\s*[,，;；])")  # "Quick one: werewolves, seer trains"


def without_game_name(text: str) -> str:
    """The text with each mention of "werewolves" that names the game blanked out (same length)."""
    out = list(text)
    for m in re.finditer(GAME_NAME, text, re.IGNORECASE | re.MULTILINE):
        group = next(i for i in (1, 2, 3, 4) if m.group(i))
        if group == 4 and re.search(r"(?:train\w*|static|frozen|learners?|roles?|sides?|训练\w*|静态|角色)\s*[:：]\s*$",
                                    text[:m.start(group)], re.IGNORECASE):
            continue  # "trainable: werewolves, seer": the role
        out[m.start(group):m.end(group)] = " " * (m.end(group) - m.start(group))
    return "".join(out)


def _and(words: list[str]) -> str:
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else "".join(words)


def roles_in(text: str) -> list[str]:
    return [role for role, pattern in ROLE_WORDS.items() if re.search(pattern, text, re.IGNORECASE)]


def seat_counts(facts: Facts, notes: list[str]) -> None:
    """Mark role and player counts that match the family's fixed seats; note a different one."""
    for role, pattern in ROLE_WORDS.items():
        for m in facts.src.finditer(rf"{NUM}\s*(?:名|个|位)?\s*(?:{pattern})"):
            if to_int(m.group(1)) == SEATS[role]:
                facts.src.mark(*m.span())
            else:
                notes.append(f"The werewolves family seats {SEATS[role]} {role}(s); the spec asks for "
                             f"{m.group(1)} (see unparsed): edit DEFAULT_ROLES in game_engine.py after rendering.")
    for m in facts.src.finditer(rf"{NUM}\s*(?:名|个|位)?\s*(?:玩家|players?\b|人局|-player|人(?=\s*(?:狼人杀|版|场)))"):
        n = to_int(m.group(1))
        if n == sum(SEATS.values()):
            facts.src.mark(*m.span())
        elif n is not None and n < 3:  # "投票放逐一名玩家", "kill one player": a rule's wording, not the table
            continue
        else:
            notes.append(f"The werewolves family seats {sum(SEATS.values())} players (3 werewolves, seer, witch, "
                         f"hunter, 3 villagers); the spec asks for {m.group(1)} (see unparsed): edit DEFAULT_ROLES "
                         "in game_engine.py after rendering.")


def other_roles(facts: Facts, notes: list[str]) -> None:
    """Note roles of other Werewolves variants that the family has no seat for (guard, idiot, cupid, ...)."""
    named = sorted({m.group().lower() for m in facts.src.finditer(OTHER_ROLES)})
    if named:
        notes.append(f"The spec names role(s) the werewolves family has no seat for ({', '.join(named)}): the plan "
                     "seats 3 werewolves, the seer, the witch, the hunter and 3 villagers; add the other roles in "
                     "game_engine.py after rendering.")


def split_roles(facts: Facts, notes: list[str]) -> tuple[list[str], list[str]]:
    """(trainable roles, static roles) in seat-table order."""
    trainable: set[str] = set()
    static: set[str] = set()
    names = [m.name.lower() for _, m in facts.static_models]
    for line in re.split(r"\n|[;\u3002\uff1b]|\.(?=\s)", without_game_name(facts.text)):  # lines, sentences
        pending: list[str] = []
        listed = None  # the side of a "key: roles" segment ("trainable: seer, witch"): its list goes on after commas
        for segment in re.split(r"[,，]", line):
            roles, lower = roles_in(segment), segment.lower()
            if re.search(STATIC_WORDS, segment, re.IGNORECASE) or any(name in lower for name in names):
                side = static
            elif re.search(TRAINABLE_WORDS, segment, re.IGNORECASE):
                side = trainable
            elif re.search(PLAYED_BY_WORDS, segment, re.IGNORECASE):
                side = static
            else:
                pending += roles
                continue
            # a role list before a segment that names some of the same roles describes the game, it is not the
            # subject of that segment ("预言家女巫猎人守卫，狼人和预言家训练": only the wolves and the seer train)
            side.update(roles + ([] if set(pending) & set(roles) else pending))
            pending = []
            listed = side if re.search(r"[:：=]", segment) else None
        if listed is not None:
            listed.update(pending)
    static -= trainable
    if not trainable and not static:
        trainable = set(DEFAULT_TRAINABLE)
        notes.append("The spec does not say which roles train: the werewolves and the seer share the trainable "
                     "model, the other roles play the static model (the family's default).")
    elif not trainable:
        notes.append("No role is trainable in this spec: nothing would learn (`vibe-rl doctor` reports it). "
                     "Say which roles share the trainable model.")
    return [r for r in ROLES if r in trainable], [r for r in ROLES if r not in trainable]


def opponent(facts: Facts, notes: list[str]) -> StaticModel:
    """The static model; an env var named *_BASE_URL in the spec replaces a fixed URL."""
    if facts.static_models:
        model = facts.static_models[0][1].model_copy()
    else:
        model = StaticModel(name="opponent")
        notes.append("No static model named: the static roles play 'opponent', a frozen local copy of the "
                     "trainable model.")
    return static_endpoint(facts, model)


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


def gpus(facts: Facts, notes: list[str]) -> tuple[int, int]:
    """(GPUs of server1, total)."""
    g = facts.gpus
    total = facts.use(g.total)
    server = first_given(facts.use(g.mode_per_server.get("agent_roll")),
                         facts.use(facts.servers[0].gpus if 0 in facts.servers else None), facts.use(g.per_server))
    if server is None:
        server = 1 if total is None else total
        notes.append(f"No GPU count for server1: using {server}" + (" (the total)." if total else "."))
    if total is None:
        total = server
        notes.append(f"No total GPU count given: the node needs {total}.")
    return server, total


def build(facts: Facts, manifest: Manifest) -> TaskSpec:
    notes: list[str] = list(facts.notes)
    seat_counts(facts, notes)
    other_roles(facts, notes)
    game: dict = {}
    if facts.src.search(SIDE_RULE_WORDS):
        game["win_rule"] = "side"
    elif not facts.src.search(PARITY_WORDS):
        notes.append("Win rule not given: werewolves win at parity (win_rule = parity).")
    days = facts.days
    if days is None and facts.rounds is not None:  # a round of Werewolves is one night and one day
        days = facts.rounds
        notes.append(f"Read the spec's {facts.rounds.value} rounds as the day limit (a round is a night and a day).")
    game_parameter(facts, game, "max_days", days, notes, manifest, "day limit")
    game_parameter(facts, game, "num_tasks", facts.num_tasks, notes, manifest, "mock dataset size")
    game = manifest.resolve_parameters(game)
    trainable, static = split_roles(facts, notes)
    model = opponent(facts, notes)
    teams = teams_for(trainable, static, model.name)
    if static:
        static_note(facts, model, notes)
    first = facts.server_path(0) or (facts.model_paths[0] if facts.model_paths else None)
    model_path = facts.use(first) or "tiny"
    if first is None:
        no_model_path(facts, notes)
    server_gpus, total = gpus(facts, notes)
    port = facts.use(facts.servers[0].port if 0 in facts.servers and facts.servers[0].port else
                     (facts.ports[0] if facts.ports else None))
    if port is None:
        port = 10086
        notes.append("No port given: server1 on 10086.")
    if len([t for t in teams if t.model == "server1"]) > 1:
        notes.append("The trainable teams sit on opposite sides: each game opens one episode per team on server1, "
                     "rewarded for that team's side (GRPO groups '<seed>-<team>').")
    server = Server(name="server1", port=port, model_path=model_path, gpus=server_gpus, config="config.yaml",
                    url_env="VIBE_RL_SWARM_URL", static_models=[model.name] if static else [])
    modes = planned_modes(facts, [Mode(name="agent_roll", script="agent_roll.py", run_file="agent_run.py",
                                       servers=["server1"], rewarded={"server1": teams[0].name},
                                       gpus={"server1": server_gpus})], notes)
    return TaskSpec(
        family=manifest.name, name=manifest.name, short_name=short_name(facts, manifest, notes),
        title=(f"Werewolves: GRPO with a shared {'/'.join(trainable)} model" if len(trainable) > 1 else
               (f"Werewolves: GRPO for the {trainable[0]}" if trainable else "Werewolves: GRPO")),
        description=(f"Train the {_and(trainable) or 'no role'} of a 9-player Werewolves game on one shared model "
                     f"({model_path}) against the {_and(static) or 'nobody'} played by {model.name}."),
        gpus=total, game=game, teams=teams, servers=[server], static_models=[model] if static else [],
        training=training(facts, notes, batch_size=32, grpo_n=6, temperature=0.7), modes=modes,
        reward=reward(facts, notes, per=" (per side)"), constraints=constraints(facts, notes, random_ids=True),
        notes=notes,
    )
