"""Offline planner rules of the werewolves family (loaded by file path; `build(facts, manifest) -> TaskSpec`).

The role table is the `roles` parameter (standard: 3 werewolves, seer, witch, hunter, 3 villagers), set by the
spec's role counts and player count (`role_table`); `split_roles` reads which roles train and which play a
static model; an unplayable table is a PlannerError. The vocabulary is words.yaml (`WORDS`)."""

from __future__ import annotations

import re

from vibe_rl.errors import PlannerError
from vibe_rl.planner import common
from vibe_rl.planner.facts import Facts
from vibe_rl.planner.table import Row
from vibe_rl.planner.text import NUM, to_int
from vibe_rl.scaffold.families import Manifest, family_words
from vibe_rl.schema.job import StaticModel
from vibe_rl.schema.spec import Mode, Server, TaskSpec, Team

WORDS = family_words(__file__)
ROLE_WORDS: dict[str, str] = WORDS["roles"]
ROLES, GODS = list(ROLE_WORDS), ["seer", "witch", "hunter"]
COPY = "opponent"  # the frozen local copy of the trainable model, the family's default static model
PARITY_WORDS, OTHER_ROLES = WORDS["parity"], WORDS["other_roles"]
ROUNDS_AS_DAYS = Row("max_days", en=(r"max[\s_-]*rounds",), zh=("轮数",), after=("rounds?", "轮"))  # table row
# "Werewolves" as the game's name, not the role: at the start of the spec or a line ("Werewolves with the seer
# trainable", "# Werewolf RL"), or with a game word ("a werewolf game", "the game of werewolves").
_WOLF, _NEXT = WORDS["game_name"], WORDS["after_game_name"]
GAME_NAME = (rf"^[\s#*-]*(?:the\s+)?({_WOLF})(?!\s*[:：=]\s*\d)(?=\s+(?:{_NEXT})\b|\s*[:(.;：（]|\s*$)"
             rf"|({_WOLF})(?=\s+(?:{WORDS['game_word']})\b)"
             rf"|(?:game|round|rounds)\s+of\s+(?:the\s+)?({_WOLF})\b"
             rf"|(?<=[:：])\s*({_WOLF})(?=\s*[,，;；])"  # "Quick one: werewolves, seer trains"
             rf"|^[\s#*-]*(?:in|for|on)\s+(?:a\s+|the\s+)?({_WOLF})(?=\s*[(（,，])"  # "In werewolves (standard 9), ..."
             rf"|\A[\s#*-]*(?:the\s+)?({_WOLF})(?=\s*[,，])")  # the spec's first word: "Werewolves, seer trains ..."


def without_game_name(text: str) -> str:
    """The text with each mention of "werewolves" that names the game blanked out (same length)."""
    out = list(text)
    for m in re.finditer(GAME_NAME, text, re.IGNORECASE | re.MULTILINE):
        a, b = m.span(m.lastindex)  # the one group that matched
        if m.lastindex == 4 and re.search(rf"(?:{WORDS['role_list_key']})\s*[:：]\s*$", text[:a], re.IGNORECASE):
            continue  # "trainable: werewolves, seer": the role
        out[a:b] = " " * (b - a)
    return "".join(out)


def _and(words: list[str]) -> str:
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else "".join(words)


def roles_in(text: str) -> list[str]:
    return [role for role, pattern in ROLE_WORDS.items() if re.search(pattern, text, re.IGNORECASE)]


# A count of a role: "3 werewolves", "4狼", "两个狼人", "one witch", "werewolves: 4", "平民×4". "wolves" counts
# the werewolves here only ("7 players, 2 wolves"), never "wolf king" or a tmux name like wolf-swarm-server.
COUNT_WORDS = {**ROLE_WORDS, "werewolf": ROLE_WORDS["werewolf"].replace("[人杀]", "[人杀王]"),
               "villager": ROLE_WORDS["villager"] + "|" + WORDS["count_villager"]}  # "4狼4民"
GOD_COUNT = WORDS["god_count"]  # "2神" / "2 gods": that many of seer, witch and hunter ("3狼3民2神")
_SEAT = WORDS["seat"]  # within a line: "RL v2\nPlayers: 8" holds no "2 players"
NEGATION = rf"(?:{WORDS['negation']})"  # a group: a pattern goes on after it
_LIST_SEP = rf"\s*(?:{WORDS['list_sep']})\s*(?:an?\s+|the\s+|any\s+)?"
PLAYER_COUNT = (rf"{NUM}{_SEAT}(?:玩家|players?\b|人局|-player|人(?=\s*(?:狼人杀|版|场|[:：(（])))"
                rf"|(?:num[_ ]players|player count|number of players|玩家数|玩家人数|人数)\s*[:：=]?\s*{NUM}"
                rf"|^[ \t]*(?:players|玩家)\s*[:：=]\s*{NUM}")  # "Players: 8 (3 werewolves, ...)"
MIN_PLAYERS, MAX_PLAYERS = 4, 99  # agent_run draws player ids player_1 .. player_99
# A whole seat table: a "roles:" block of indented lines, a TOML/INI "[roles]" section, a sum of counts
# ("2 狼 + 1 预言家 + 3 村民") or 3 or more bullet lines that each count a role; a role it does not list has no seat
_TABLE_KEY, _COUNT = WORDS["roles_block"], rf"{NUM}{_SEAT}(?:{'|'.join(COUNT_WORDS.values())})"
ROLES_BLOCK = (rf"^[ \t]*(?:{_TABLE_KEY})\s*[:：][ \t]*\n((?:[ \t]+\S.*(?:\n|$))+)"
               rf"|^[ \t]*\[(?:{_TABLE_KEY})\][ \t]*$|{_COUNT}(?:[ \t]*\+[ \t]*{_COUNT}){{2,}}"
               rf"|(?:^[ \t]*[-*•][ \t]*{_COUNT}.*\n){{2}}[ \t]*[-*•][ \t]*{_COUNT}")
PLURAL = {"werewolf": "werewolves", "witch": "witches"}


def _seats(roles: dict[str, int]) -> str:
    """'4 werewolves, 1 seer, 1 hunter and 5 villagers' (roles with no seat left out)."""
    return _and([f"{n} {role if n == 1 else PLURAL.get(role, role + 's')}" for role, n in roles.items() if n])


def _counts_in(text: str) -> dict[str, list[tuple[int, re.Match]]]:
    """Role -> (count, match) for each count ("kill one villager" is none) and "no <role>" the text states."""
    found: dict[str, list[tuple[int, re.Match]]] = {role: [] for role in ROLES}
    for role, pattern in COUNT_WORDS.items():
        for form in (rf"{NUM}(?:[ \t]*[x×])?{_SEAT}(?:{pattern})", rf"(?:{pattern})[ \t]*(?:[:：=×xX*][ \t]*{NUM}"
                     rf"(?:[ \t]*(?:名|个|位|人)(?!局))?|{NUM}[ \t]*(?:名|个|位|人)(?!局))"):
            for m in re.finditer(form, text, re.IGNORECASE):
                before = text[text.rfind("\n", 0, m.start()) + 1:m.start()][-24:]
                if not re.search(WORDS["action"], before, re.IGNORECASE):
                    found[role].append((to_int(next(g for g in m.groups() if g)), m))
    roles_re = "|".join(f"(?:{p})" for p in COUNT_WORDS.values())
    neg = rf"{NEGATION}\s*(?:an?\s+|the\s+|any\s+)?(?:{roles_re})(?:{_LIST_SEP}(?:{roles_re}))*"
    for m in re.finditer(neg, text, re.IGNORECASE):  # "no villager is trained": not the table
        if not re.match(rf"\s+(?:{WORDS['role_verb']})\b", text[m.end():], re.IGNORECASE):
            wolves = ["werewolf"] if re.search(r"\bwol(?:f|ves)\b", m.group(), re.I) else []
            for role in roles_in(m.group()) + wolves:
                found[role].append((0, m))
    return found


def _once(facts: Facts, found: list[tuple[int, re.Match]], what: str, count: str = "count") -> int | None:
    """The one number the (number, match) pairs state, its matches marked; two numbers are a PlannerError."""
    values = sorted({n for n, _ in found})
    if len(values) > 1:
        raise PlannerError(f"The spec gives {' and '.join(map(str, values))} {what}: state the {count} once.")
    for _, m in found:
        facts.src.mark(*m.span())
    return values[0] if values else None


def gods_seats(facts: Facts, text: str, given: dict[str, int], notes: list[str]) -> None:
    """A count of gods ("3狼3民2神", "2 gods") seats that many of seer, witch and hunter: the ones the spec names
    ("2神（预言家、女巫）"), else the first ones in that order; the others get no seat. Every god then counts as
    given. More named gods than the count, or more gods than the family has, is a PlannerError."""
    gods = _once(facts, [(to_int(m.group(1)), m)
                         for m in re.finditer(rf"{NUM}{_SEAT}(?:{GOD_COUNT})", text, re.IGNORECASE)], "gods")
    if gods is None:
        return
    named = [g for g in GODS if given.get(g)]
    seats, free = sum(given[g] for g in named), [g for g in GODS if g not in given]
    if seats > gods or seats + len(free) < gods:
        raise PlannerError(f"The spec asks for {gods} gods but " + (
            f"names {seats} god seats ({_seats({g: given[g] for g in named})})" if seats > gods else
            f"the werewolves family has only 3 gods, the seer, witch and hunter ({seats + len(free)} left to seat)")
            + ": make them agree, or name the gods (e.g. '2神（预言家、女巫）').")
    extra = free[:gods - seats]
    given |= {g: 1 for g in extra} | {g: 0 for g in GODS if g not in named and g not in extra}
    if extra:
        notes.append(f"{gods} gods without saying which: seating the {_and(named + extra)} (say which gods, "
                     "e.g. '2神（预言家、猎人）').")


def role_table(facts: Facts, notes: list[str], manifest: Manifest) -> dict[str, int]:
    """The seats the spec asks for, from per-role counts (`_counts_in`; "no hunter" / "不要女巫" seat 0) and a
    total player count (below 3, "投票放逐一名玩家", it is rule wording). A seer, witch or hunter named without a
    number on a line that counts roles ("4狼、预言家、女巫、猎人、4平民") seats 1. Roles not named keep the
    standard count; with a total ("12人局") and no werewolf count a third of the table are werewolves;
    villagers fill the rest unless counted, and then the counts must add up to the total (when the named roles
    alone fill it, unnamed gods get no seat). Every number read is marked; a role given two counts, a
    contradiction or an unplayable table is a PlannerError that names the fix."""
    standard: dict[str, int] = dict(manifest.parameters["roles"].default)
    text = without_game_name(facts.text)
    found = _counts_in(text)
    quoted = {role: "; ".join(repr(m.group().strip()) for _, m in counts) for role, counts in found.items()}
    given = {role: n for role, counts in found.items()
             if (n := _once(facts, counts, f"{role} seats ({quoted[role]})")) is not None}
    lines = {(text.rfind("\n", 0, m.start()) + 1, (text.find("\n", m.end()) + 1 or len(text) + 1) - 1)
             for counts in found.values() for n, m in counts if n}  # the lines that count roles
    given |= {g: 1 for g in GODS if not found[g]
              and any(re.search(ROLE_WORDS[g], text[a:b], re.IGNORECASE) for a, b in lines)}
    block = given and re.search(ROLES_BLOCK, text, re.IGNORECASE | re.MULTILINE)
    left = [r for r in standard if r not in given] if block else []
    given |= {r: 0 for r in left}  # a "roles:" block is the whole table: a role it does not list has no seat
    notes += [f"The spec's role table lists every seat: no {_and(left)} (add one to seat it)."] if left else []
    gods_seats(facts, text, given, notes)
    total = _once(facts, [(n, m) for m in re.finditer(PLAYER_COUNT, text, re.IGNORECASE | re.MULTILINE)
                          if (n := to_int(next(g for g in m.groups() if g))) >= 3], "players", "player count")
    if not given and total is None:
        notes.append(f"No role table given: seating the standard {sum(standard.values())} players "
                     f"({_seats(standard)}; game.roles).")
        return standard
    roles = {role: given.get(role, standard[role]) for role in ROLES}
    kept = [r for r in GODS if r not in given and roles[r]]
    if total is not None and "werewolf" not in given:
        roles["werewolf"] = max(1, total // 3)
        notes.append(f"No werewolf count given: a third of the {total} players, {roles['werewolf']} werewolves.")
    if total is not None and "villager" not in given:
        roles["villager"] = total - sum(n for role, n in roles.items() if role != "villager")
        if roles["villager"] < 0:
            raise PlannerError(
                f"The spec asks for {total} players, but {_seats({**roles, 'villager': 0})} already fill "
                f"{total - roles['villager']} seats: say {total - roles['villager']} players, or fewer roles "
                f"(e.g. 'no {kept[-1] if kept else 'hunter'}').")
        notes.append(f"Villagers fill the rest of the {total} players: {roles['villager']} villager"
                     + ("" if roles["villager"] == 1 else "s") + ".")
    seated = sum(roles.values())
    if total is not None and kept and seated - len(kept) == total:  # the named roles fill the stated table
        notes.append(f"The {total} players are filled by the roles the spec names: no {_and(kept)} (name one to seat "
                     "it, and raise the player count).")
        roles |= {role: 0 for role in kept}
        seated, kept = total, []
    if total is not None and seated != total:
        unseated = sorted({m.group().lower() for m in re.finditer(OTHER_ROLES, text, re.IGNORECASE)})
        raise PlannerError(
            f"The spec asks for {total} players, but its role counts seat {seated} ({_seats(roles)}"
            + (f"; the {_and(kept)} kept the standard 1 seat" if kept else "")
            + (f"; {', '.join(unseated)} has no seat in this family" if unseated else "") + "): make them agree, e.g. "
            f"{_seats({'villager': abs(total - seated)}).replace(' ', ' more ' if total > seated else ' fewer ', 1)} or "
            f"'{seated} players'.")
    if kept:
        notes.append(f"The spec does not count the {_and(kept)}: 1 seat each (say 'no {kept[0]}' to leave one out).")
    wolves = roles["werewolf"]  # a table the game cannot be played with:
    if wolves < 1:
        raise PlannerError("The role table seats no werewolf: the village would win before the first night. Give "
                           "at least 1 werewolf (e.g. '2 werewolves').")
    if seated < MIN_PLAYERS:
        raise PlannerError(f"The role table seats {seated} players ({_seats(roles)}); the werewolves family needs at "
                           f"least {MIN_PLAYERS}: add villagers (e.g. '{MIN_PLAYERS} players').")
    if seated > MAX_PLAYERS:
        raise PlannerError(f"The role table seats {seated} players; the werewolves family seats at most "
                           f"{MAX_PLAYERS}: ask for fewer players.")
    if wolves >= seated - wolves:
        raise PlannerError(f"The role table seats {wolves} werewolves against {seated - wolves} other players "
                           f"({_seats(roles)}): the werewolves would already have won. Seat fewer werewolves or more "
                           f"villagers (at least {2 * wolves + 1} players for {wolves} werewolves).")
    notes.append(f"Seats {seated} players: {_seats(roles)} (game.roles).")
    return roles


# Side split: which seated roles train, which play the static model and which the frozen local copy. A side
# named as a whole stands for its seated roles: the village ("好人阵营", "the good guys"), the gods ("神职").
SIDES = ((WORDS["every_role"], ROLES), (WORDS["village_side"], [r for r in ROLES if r != "werewolf"]),
         (WORDS["god_side"], GODS))
# what a part says its roles do, the first that applies after a static model's name
SIDE_WORDS = (("copy", WORDS["copy"]), ("static", WORDS["static"]), ("trainable", WORDS["trainable"]),
              ("trainable", WORDS["local_path"]), ("static", WORDS["played_by"]))


def _segment(segment: str, seats: dict[str, int], names: list[str]) -> tuple[list[str], str | None]:
    """(the roles a comma part names, what it says they do: 'static', 'copy' (the frozen local copy),
    'trainable' or None). The roles: each role word and each seated role of a side (or of the whole table:
    "everyone", "所有角色") it names; with a negation only seated roles. A part that states the seat table (a
    player count or two role counts: "12 players: 4 wolves") only describes the game: None. Else a static
    model's name or a static word decides first ('opponent' / '冻结副本' without a model name is the copy); a
    local path with 'uses' / '用' trains ("everyone else uses /models/q7b")."""
    roles = set(roles_in(segment)) | {r for words, side in SIDES if re.search(words, segment, re.IGNORECASE)
                                      for r in side if seats.get(r)}
    negated = re.search(NEGATION, segment, re.IGNORECASE)
    roles = [r for r in ROLES if r in roles and (seats.get(r) or not negated)]
    counts = sum(len(re.findall(rf"{NUM}{_SEAT}(?:{p})", segment, re.IGNORECASE))
                 for p in [*COUNT_WORDS.values(), GOD_COUNT])
    if re.search(PLAYER_COUNT, segment, re.IGNORECASE) or counts >= 2:
        return roles, None
    if any(name in segment.lower() for name in names):
        return roles, "static"
    return roles, next((side for side, words in SIDE_WORDS if re.search(words, segment, re.IGNORECASE)), None)


def split_roles(facts: Facts, notes: list[str], seats: dict[str, int]) -> tuple[list[str], list[str], list[str],
                                                                                dict[str, str]]:
    """(trainable roles, static roles, the static roles that play the frozen local copy, static role -> the
    static model its part names) in seat-table order, read per comma part of each line (`_segment`); roles
    named in a part without a side take the next part's ("the hunter and the witch are played by ..."). A
    role said to have no seat ("no hunter") gets no side; "the rest" / "其余" takes the seated roles no other
    part gives a side. With no side stated the werewolves and the seer train (noted), less a role the table
    seats none of; a trainable role without a seat is a PlannerError."""
    sides: dict[str, set[str]] = {"trainable": set(), "static": set(), "copy": set()}
    rest, rest_model, names = None, None, [m.name.lower() for _, m in facts.static_models]
    model_of: dict[str, str] = {}
    for line in re.split(r"\n|[;\u3002\uff1b]|\.(?=\s)", without_game_name(facts.text)):  # lines, sentences
        pending: list[str] = []
        listed = None  # the side of a "key: roles" segment ("trainable: seer, witch"): its list goes on after commas
        # "A train while B are static", "only the wolves train and the rest use gpt-4o"
        for segment in re.split(WORDS["part_break"], line):
            roles, side = _segment(segment, seats, names)
            if side is None:  # a part that names no role ends the list ("Werewolves, 4 GPUs, the model is ...")
                pending = pending + roles if roles else []
                continue
            named = next((n for n in names if n in segment.lower()), None) if side == "static" else None
            if re.search(WORDS["rest"], segment, re.IGNORECASE) and not re.search(PARITY_WORDS, segment, re.I):
                rest, rest_model = side, named
            # a role list before a segment that names some of the same roles describes the game, it is not the
            # subject of that segment ("预言家女巫猎人守卫，狼人和预言家训练": only the wolves and the seer train)
            roles += [] if set(pending) & set(roles) else pending
            sides[side].update(roles)
            model_of |= {r: named for r in roles if named}
            pending, listed = [], side if re.search(r"[:：=]", segment) else None
        if listed is not None:
            sides[listed].update(pending)
    if rest is not None:
        others = [r for r in ROLES if seats.get(r) and not any(r in side for side in sides.values())]
        sides[rest].update(others)
        model_of |= {r: rest_model for r in others if rest_model}
    trainable = sides["trainable"]
    if not any(sides.values()):
        trainable = {r for r in ("werewolf", "seer") if seats.get(r)}
        notes.append("The spec does not say which roles train: " + (
            "the werewolves and the seer share the trainable model" if "seer" in trainable else
            "the werewolves take the trainable model (the table seats no seer)")
            + ", the other roles play the static model (the family's default).")
    elif not trainable:
        notes.append("No role is trainable in this spec: nothing would learn (`vibe-rl doctor` reports it). "
                     "Say which roles share the trainable model.")
    if role := next((r for r in ROLES if r in trainable and not seats.get(r)), None):
        raise PlannerError(f"The spec trains the {role}, but its role table seats no {role} ({_seats(seats)}"
                           f"): give the {role} a seat, or leave it out of the trainable roles.")
    static = [r for r in ROLES if r not in trainable]
    copy = [r for r in static if r in sides["copy"]]
    return [r for r in ROLES if r in trainable], static, copy, {r: m for r, m in model_of.items() if r in static}


def teams_for(trainable: list[str], static: list[str], static_name: str, copy: list[str],
              model_of: dict[str, str]) -> list[Team]:
    """One team per side of the trainable roles (own episode and reward; "seer" when only the seer trains),
    then per side and model of the static roles (a taken name gets "_static", "_opponent", then a number):
    `copy` plays the frozen local copy, a role in `model_of` that model, the others `static_name`."""
    copied = [r for r in static if r in copy or static_name == COPY]
    teams: list[Team] = []
    played = {r: model_of.get(r, static_name) for r in static if r not in copied}
    groups = [(True, "server1", trainable), *[(False, m, [r for r in played if played[r] == m])
                                              for m in dict.fromkeys(played.values())], (False, COPY, copied)]
    for trained, model, roles in groups:
        village = [r for r in roles if r != "werewolf"]
        for side, mine in (("werewolves", [r for r in roles if r == "werewolf"]),
                           ("seer" if trained and village == ["seer"] else "village", village)):
            if mine:
                names = (side, f"{side}_static", f"{side}_{COPY}", *(f"{side}_{k}" for k in range(2, 9)))
                teams.append(Team(name=next(n for n in names if n not in {t.name for t in teams}), roles=mine,
                                  model=model))
    return teams


def build(facts: Facts, manifest: Manifest) -> TaskSpec:
    notes: list[str] = list(facts.notes)
    seats = role_table(facts, notes, manifest)
    if named := sorted({m.group().lower() for m in facts.src.finditer(OTHER_ROLES)}):
        notes.append("The spec names role(s) the werewolves family has no seat for "
                     f"({', '.join(named)}): the plan seats {_seats(seats)}; add the other roles in "
                     "game_engine.py after rendering.")
    game: dict = {"roles": seats}
    if facts.src.search(WORDS["side_rule"]):
        game["win_rule"] = "side"
    elif not facts.src.search(PARITY_WORDS):
        notes.append("Win rule not given: werewolves win at parity (win_rule = parity).")
    days = common.tabled(facts, "max_days", manifest, notes)  # else rounds: a round is one night and one day
    if days is None and (days := common.tabled(facts, "max_days", manifest, notes, [ROUNDS_AS_DAYS])):
        notes.append(f"Read the spec's {days.value} rounds as the day limit (a round is a night and a day).")
    common.game_parameter(facts, game, "max_days", days, notes, manifest, "day limit")
    common.game_parameter(facts, game, "num_tasks", None, notes, manifest, "mock dataset size")
    game = manifest.resolve_parameters(game)
    trainable, static, copy, model_of = split_roles(facts, notes, seats)
    model = common.static_opponent(facts, notes, "the static roles")
    known = {m.name.lower(): common.static_endpoint(facts, m) for _, m in facts.static_models}
    teams = teams_for(trainable, static, model.name, copy, {r: known[m].name for r, m in model_of.items()})
    statics = [m for m in {model.name: model, **{m.name: m for m in known.values()}, COPY: StaticModel(name=COPY)}
               .values() if any(t.model == m.name for t in teams)]
    for m in statics:
        common.static_note(facts, m, notes)
    if copy and model.name != COPY:
        notes.append(f"The {_and([PLURAL.get(r, r + 's') for r in copy])} play '{COPY}', a frozen local copy "
                     f"of the trainable model, as the spec says; the other static roles play {model.name}.")
    model_path, port, server_gpus, total = common.first_server(facts, notes)
    if len([t for t in teams if t.model == "server1"]) > 1:
        notes.append("The trainable teams sit on opposite sides: each game opens one episode per team on server1, "
                     "rewarded for that team's side (GRPO groups '<seed>-<team>').")
    server = Server(name="server1", port=port, model_path=model_path, gpus=server_gpus, config="config.yaml",
                    url_env="VIBE_RL_SWARM_URL", static_models=[m.name for m in statics])
    mode = Mode(name="agent_roll", script="agent_roll.py", run_file="agent_run.py", servers=["server1"],
                rewarded={"server1": teams[0].name}, gpus={"server1": server_gpus})
    modes = common.planned_modes(facts, [mode], notes)
    return TaskSpec(
        family=manifest.name, name=manifest.name, short_name=common.short_name(facts, manifest, notes),
        title=(f"Werewolves: GRPO with a shared {'/'.join(trainable)} model" if len(trainable) > 1 else
               (f"Werewolves: GRPO for the {trainable[0]}" if trainable else "Werewolves: GRPO")),
        description=(f"Train the {_and(trainable) or 'no role'} of a {sum(seats.values())}-player Werewolves "
                     f"game on one shared model ({model_path}) against the {_and(static) or 'nobody'} played "
                     f"by {_and([m.name for m in statics]) or model.name}."),
        gpus=total, game=game, teams=teams, servers=[server], static_models=statics,
        training=common.training(facts, notes, batch_size=32, grpo_n=6, temperature=0.7), modes=modes,
        reward=common.reward(facts, notes, per=" (per side)"),
        constraints=common.constraints(facts, notes, random_ids=True), notes=notes,
    )
