"""Offline planner rules of the turn_based family (loaded by file path; `build(facts, manifest) -> TaskSpec`).

Only the generic numbers are planned (players, turn limit, model, GPUs, training sizes, reward); the game's
own rules cannot be read offline: they are quoted into the project (spec.md, game_rules.py's docstring) for a
person or an LLM to write, so every number of the rules stays in `unparsed`, on purpose. The vocabulary
(player and seat words, two-player games, the learner's names, title patterns) is words.yaml (`WORDS`)."""

from __future__ import annotations

import re

from vibe_rl.errors import PlannerError
from vibe_rl.planner import common
from vibe_rl.planner.facts import DRAW, Facts, Found
from vibe_rl.planner.text import NUM
from vibe_rl.scaffold.families import Manifest, family_words
from vibe_rl.schema.spec import Mode, Server, TaskSpec, Team

WORDS = family_words(__file__)  # words.yaml: this family's vocabulary
PLAYERS = rf"{NUM}\s*(?:名|个|位)?\s*(?:{WORDS['players']})"
_LEARNER = rf"(?:the\s+)?(?:{WORDS['learner']})(?:{WORDS['learner_aside']}){{0,3}}"
ORDER = {w: i for i, said in enumerate(WORDS["order"].split("|")) for w in said.split()}  # word -> seat
ORD = rf"((?:{'|'.join(ORDER)})(?![a-z]))"  # a turn-order word: "first", "2nd", "后手"
# "the learner always sits in seat 0", "learner seat: 1", "learner_seat=2", "Our learner plays X (seat 0)", "the learner plays second (O)",
# "我们的模型执白,也就是后手", "the **learner** and moves **first**" (markdown emphasis), "learner moving 2nd"
SEAT = (rf"{_LEARNER}\s*(?:always\s+)?(?:{WORDS['seat_verbs']})?[\s_]*(?:(?:{WORDS['sides']})\s*[(（,，]?\s*)?(?:the\s+)?seat"
        rf"\s*(?:#|number|no\.?)?\s*[:：=]?\s*(\d+)"
        rf"|{_LEARNER}\s*(?:always\s+)?(?:{WORDS['side_verbs']})?\s*(?:(?:{WORDS['sides']})\s*(?:方|棋|stones?|pieces?)?"
        rf"(?:{WORDS['side_link']}))?{ORD}|{_LEARNER}[^.;,\n]{{0,30}}?\b(?:{WORDS['order_verbs']})\s+[*_]{{0,2}}{ORD}")
# "训练的模型坐在第 3 个位置": counted from 1 unless a 0-based word follows ("第 2 个位置（从 0 开始数）")
ZH_SEAT = rf"{_LEARNER}\s*(?:坐在|坐|在|位于|是)?\s*第\s*(\d+)\s*个?\s*(?:位置|座位|号位|位)"
# What restates the seat right after it: "seat 2 (moves second)", "seat 2 (1-based)", "= 2, # 0-based", "first (seat 0)"
AGAIN = rf"\W*(?:(?:moves|goes|plays)\s+)?{ORD}|\W*([01])[\s-]*(?:based|indexed)|\W*seat\s*(\d+)"
# "the learner is player 2 of 3": players are counted from 1 unless the spec says 0-based
PLAYER_NUMBER = rf"{_LEARNER}\s*(?:is|plays as|=|[:：])?\s*player\s*#?\s*(\d+|(?-i:[A-D])\b)"  # "player B": seat 1
NOT_OPENING = rf"(?i:{WORDS['not_opening']})\b"  # "Train a ...": a request, not the game's name
NOT_PLAYED = rf"(?:(?:{WORDS['not_played']})\b\s*)+"  # "to play the game well": no name
CJK = re.compile(WORDS["cjk"])


def title_of(text: str) -> str:
    """The game's name: a quoted or capitalised name after 'for'/'play'/'玩', else one the spec opens with (a
    leading number belongs to it: '20 Questions'; it ends before 'for', 'vs', ...), else a lowercase one after
    'to play', else a game words.yaml knows ('chess'), else the family default (not a name in Chinese
    characters: code and prompts are English)."""
    title = WORDS["title"]
    lead, played = re.search(title["opening"], text), re.search(title["to_play"], text)
    m = re.search(title["named"], text) or re.search(title["played_zh"], text) or re.search(title["bracketed"], text) \
        or (lead if lead and not re.match(NOT_OPENING, lead.group(1)) else None) \
        or (played if played and not re.fullmatch(NOT_PLAYED, played.group(1), re.IGNORECASE) else None)
    game = re.search(rf"{WORDS['two_player_games']}|{WORDS['turn_based_games']}", text, re.IGNORECASE)
    name = next((n.strip() for n in (m and m.group(1), game and game.group()) if n and not CJK.search(n)
                 and not re.fullmatch(r"turn[\s_-]*based", n, re.IGNORECASE)), "Turn-based game")  # else a known game
    return name[0].upper() + name[1:]


def players(facts: Facts, notes: list[str]) -> Found | None:
    """The player count: 'N players' / 'N agents, seats, debaters', heads-up (2), else 2 for a two-player game
    (chess, 五子棋, ...); a single-player game gets 2 seats, noted (the skeleton seats learner and opponent)."""
    found = facts.find(PLAYERS, rf"{NUM}\s*(?:{WORDS['seats']})\b", rf"(?<![\w.])(?:{WORDS['player_keys']})\s*[:：=]\s*{NUM}")
    if found is None and (heads := facts.src.search(WORDS["heads_up"], mark=False)):
        found = Found(2, *heads.span())
    elif found is None and (two := facts.src.search(WORDS["two_player_games"], mark=False)):
        notes.append(f"No player count given: {two.group()} is a two-player game, so num_players = 2.")
        found = Found(2, *two.span())
    if (single := facts.src.search(WORDS["single"], mark=False)) and (found is None or found.value == 1):
        notes.append(f"The spec describes a single-player game ({single.group()!r}) but the turn_based skeleton "
                     "seats one learner and at least one opponent: planned with num_players = 2 (the fewest). In "
                     "game_rules.py let the opponent seat play the environment, or give it no moves.")
        return Found(2, *single.span())
    return found


def learner_seat(facts: Facts) -> Found | None:
    """The learner's seat, 0-based ('seat 0'; 'plays first' is 0, '2nd' 1, 'sits third' 2), or None (drawn per episode)."""
    if m := facts.src.search(SEAT, mark=False) or facts.src.search(WORDS["own_side"], mark=False):
        said = next(g for g in m.groups() if g)
        seat = int(said) if said.isdigit() else ORDER[said.lower()]
        again = re.match(AGAIN, facts.text[m.end():], re.IGNORECASE)
        order, based, number = again.groups() if again else (None, None, None)
        if said.isdigit() and (based or order and ORDER[order.lower()] + 1 == seat):  # "seat 2 (moves second)": from 1
            seat -= based != "0"
        elif not (order and ORDER[order.lower()] == seat or number and not said.isdigit() and int(number) - seat in (0, 1)):
            again = None  # it says something else: not read with the seat
        return Found(seat, m.start(), m.end() + (again.end() if again else 0))
    if zh := facts.src.search(ZH_SEAT, mark=False):
        zero = re.match(rf"\W{{0,3}}(?:{WORDS['zero_based']})", facts.text[zh.end():], re.IGNORECASE)
        return Found(int(zh.group(1)) - (not zero), zh.start(), zh.end() + (zero.end() if zero else 0))
    if (player := facts.src.search(PLAYER_NUMBER, mark=False)) is None:
        return None
    zero, end = re.search(WORDS["zero_based"], facts.text, re.IGNORECASE), player.end()
    based = re.search(WORDS["numbering"], facts.text[end:end + 30], re.IGNORECASE)
    end += based.end() if based else 0
    said = player.group(1)
    return Found(int(said) - (not zero) if said.isdigit() else ord(said) - ord("A"), player.start(), end)


def build(facts: Facts, manifest: Manifest) -> TaskSpec:
    notes: list[str] = list(facts.notes)
    notes.append("turn_based skeleton: the game's rules are not planned. Write them in game_rules.py (the "
                 "functions marked WRITE) and its tests in test_game_rules.py; spec.md holds the spec.")
    text = facts.text.strip()
    quote = text.replace("\\", "/").replace('"""', "'''")  # safe inside the docstring
    game = {"title": title_of(text), "spec_text": text, "spec_quote": "" if CJK.search(text) else quote}
    draw = (m := facts.src.search(DRAW, mark=False)) and Found(float(m.group(1) or m.group(2) or 0), *m.span())
    for name, found, what in (("num_players", players(facts, notes), "player count"),
                              ("max_turns", None, "turn limit"), ("num_tasks", None, "mock dataset size"),
                              ("learner_seat", learner_seat(facts), "learner seat (-1: drawn every episode)"),
                              ("draw_reward", draw, "draw reward (null: a draw is a loss)")):
        common.game_parameter(facts, game, name, found, notes, manifest, what)
    seats = game.get("num_players", manifest.parameters["num_players"].default)
    if game.get("learner_seat", -1) >= seats:
        raise PlannerError(f"The spec seats the learner in seat {game['learner_seat']}, but the game has {seats} seats "
                           f"(0-based: 0..{seats - 1}). Name a seat below {seats}, or raise the player count.")
    model_path, port, gpus, total = common.first_server(facts, notes)
    opponent = common.static_opponent(facts, notes, "the opponent seats")
    if facts.static_models:
        common.static_note(facts, opponent, notes)
    elif wanted := facts.src.search(WORDS["self_play"], mark=False):
        notes.append(f"The spec asks for self-play ({wanted.group().strip()!r}), but the turn_based skeleton "
                     "trains one learner seat per episode: the other seats call 'opponent', a frozen copy of "
                     "the trainable model that does not learn. To train every seat, give each seat its own "
                     "episode in agent_run.py (one trainable team per seat) after rendering.")
    teams = [Team(name="learners", roles=["learner"], model="server1"),
             Team(name="opponents", roles=["opponent"], model=opponent.name)]
    mode = Mode(name="agent_roll", script="agent_roll.py", run_file="agent_run.py", servers=["server1"],
                rewarded={"server1": "learners"}, gpus={"server1": gpus})
    modes = common.planned_modes(facts, [mode], notes)
    return TaskSpec(
        family=manifest.name, name=manifest.name, short_name=common.short_name(facts, manifest, notes),
        title=f"{game['title']}: GRPO for one learner seat",
        description=(f"Train the learner seat of {game['title']} ({model_path}) against opponents played by "
                     f"{opponent.name}; the rules are in game_rules.py."),
        gpus=total, game=manifest.resolve_parameters(game), teams=teams, modes=modes, notes=notes,
        servers=[Server(name="server1", port=port, model_path=model_path, gpus=gpus, config="config.yaml",
                        url_env="VIBE_RL_SWARM_URL", static_models=[opponent.name])],
        static_models=[opponent], training=common.training(facts, notes, batch_size=16, grpo_n=4),
        reward=common.reward(facts, notes), constraints=common.constraints(facts, notes, random_ids=False),
    )
