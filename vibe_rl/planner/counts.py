"""Counts a spec states in words ("6 players", "2 of whom are spies", "三个卧底", "max 20 turns"): how they are read
when a spec says one several times, and the phrasings rewritten before any rule reads them.

Reading one count (`read_count`, behind `Facts.find`): every match of the count's patterns is a reading, in
pattern order, then text order; matches that overlap an earlier one are dropped.

- One number, one fact: a number that an earlier count already read is not read again by a later one
  ("谁是卧底：十个玩家" - the players' 十 is not also a spy count because "卧底：十个" matches a spy pattern).
- Restating the same value is fine: every place is marked as understood ("8 players, 2 of whom are spies. The
  two spies share a model").
- Two different values are a contradiction and a PlannerError that quotes both readings ("2 of whom are
  spies" says 2, "the three spies" says 3): the planner cannot know which one is meant, and taking either
  would give a silently wrong project. A correction said as one ("actually 3 spies", "改成 3 个卧底") is not
  a contradiction: vibe_rl.planner.corrections applies it before the rules read the text (the later value wins).
- A reading in rule prose ("until 2 players remain", "the last 2 players", "if the spy survives 3 rounds",
  "前 2 轮") is qualified: it never contradicts the count, is used only when there is no other reading, and is
  otherwise left unmarked, so it is listed in `unparsed`.

Rewritten phrasings (`rewrite_counts`): "2 of the 6 players are spies" / "1 out of 5 players is the spy" ->
"6 players, 2 of whom are spies", so each family's rules read both numbers; "two of them spies" -> "two of whom
are spies"; "a two-spy game" -> "two spies"; "两人对局" / "双人对战" ->
"2 名玩家对局" (a player count every family reads); a bare "N 人" alone in its part or before a role count ("，2 人，",
"谁是卧底 6 人 1 卧底") or spoken ("12个人那种") -> "N 名玩家".
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from vibe_rl.errors import PlannerError
from vibe_rl.planner.text import NUM, Found, SpecText, to_int

# Words just before a number that make it part of a rule, not the count the spec sets
_QUALIFIED_BEFORE = re.compile(
    r"(?:\b(?:last|first|final|remaining|other|top|bottom|next|until|till|when|whenever|once|if|unless|after|"
    r"before|within|survives?|surviving)\b[^,.;:!?\n]{0,20}|前|最后|剩下?|剩余|其余|其他|另外|直到|当|如果|若)\s*$",
    re.IGNORECASE)
_QUALIFIED_AFTER = re.compile(r"^\s*(?:remain\w*|are left|left\b|standing|still alive|survive\w*|时|后|剩|以后|之后)",
                              re.IGNORECASE)
_GROUP_NOUNS = r"players?|seats?|agents?|people|participants|persons"
# "2 of the 6 players are spies", "1 out of 5 players is the spy" (the role word follows the verb)
_OF_THE = re.compile(rf"\b{NUM}\s+(?:out\s+)?of\s+(?:the\s+|all\s+|all\s+the\s+)?{NUM}\s+({_GROUP_NOUNS})\s+"
                     r"(are|is|will be|play|plays)\b", re.IGNORECASE)
_OF_THEM = re.compile(rf"\b{NUM}\s+of\s+them\s+(?=spies\b|spy\b|werewol|wolves\b|undercover\b)",
                      re.IGNORECASE)
_TWO_SEATS = re.compile(r"(?<![\d一二三四五六七八九十百])(?:两|二|双)\s*人\s*(?=对局|对战|对弈|博弈|游戏|比赛|局)")


def _number_span(m: re.Match) -> tuple[int, int]:
    return m.span(next(i for i, g in enumerate(m.groups(), 1) if g is not None))


def _qualified(text: str, m: re.Match) -> bool:
    line_start = max(text.rfind(c, 0, m.start()) for c in "\n,，;；。") + 1
    return bool(_QUALIFIED_BEFORE.search(text[line_start:m.start()]) or _QUALIFIED_AFTER.match(text[m.end():]))


def read_count(src: SpecText, patterns: Iterable[str], claimed: list[tuple[int, int]]) -> Found | None:
    """The count the patterns read (see the module docstring), its restatements as `repeats`; the numbers read
    are added to `claimed`. Two different unqualified values: PlannerError naming both."""
    found: list[tuple[re.Match, int]] = []  # (match, value): one line, no overlap, a number not claimed
    for pattern in patterns:
        for m in src.finditer(pattern):
            a, b = _number_span(m)
            overlaps = any(o.start() < m.end() and m.start() < o.end() for o, _ in found)
            if "\n" in m.group().strip() or overlaps or any(x <= a < y or a <= x < b for x, y in claimed):
                continue
            found.append((m, to_int(src.text[a:b])))
    if not found:
        return None
    plain = [(m, v) for m, v in found if not _qualified(src.text, m)]
    first_m, value = (plain or found)[0]
    clash = next(((m, v) for m, v in plain if v != value), None)
    if clash is not None:
        (a, x), (b, y) = sorted([(first_m, value), clash], key=lambda item: item[0].start())
        raise PlannerError(
            f"The spec gives one count two different values: {a.group().strip()!r} says {x}, and later "
            f"{b.group().strip()!r} says {y}. Say the number once, or mark the later one as a correction "
            "('actually ...', '改成 ...': the corrected value is used), then plan again.")
    claimed += [_number_span(m) for m, v in found if v == value]
    return Found(value, *first_m.span(), [m.span() for m, v in found if v == value and m is not first_m])


# "，2 人，" / "谁是卧底 6 人 1 卧底" / "狼人杀 12 人 4狼": a bare "N 人" at the start of its part (or right after the
# game's name) that ends the part or comes before a role count is the player count ("每队 3 人" is not: 队 precedes)
_BARE_PEOPLE = re.compile(
    r"(?:^|(?<=[\n,，;；:：。(（])|(?<=谁是卧底)|(?<=狼人杀)|(?<=棋))(\s*)(\d+|[一二三四五六七八九十两]+)\s*人(?![\w局])"
    r"(?=\s*(?:$|[\n,，;；。)）]|\d+\s*(?:个|名)?\s*(?:卧底|狼|民|神|平民)|[一二三四五六七八九十两]+\s*(?:个|名)?\s*(?:卧底|狼)))",
    re.MULTILINE)


def rewrite_counts(text: str) -> tuple[str, list[str]]:
    """(the text with "N of the M players are X" as "M players, N of whom are X" and "两人对局" as "2 名玩家对局",
    notes)."""
    notes: list[str] = []

    def of_the(m: re.Match) -> str:
        notes.append(f"Read {m.group()!r} as {m.group(2)} {m.group(3)}, {m.group(1)} of whom {m.group(4)} ...")
        return f"{m.group(2)} {m.group(3)}, {m.group(1)} of whom {m.group(4)}"

    text = _OF_THE.sub(of_the, text)
    text = _OF_THEM.sub(r"\1 of whom are ", text)  # "eight players, two of them spies"
    text = re.sub(rf"\b{NUM}-(spy|spies|werewolf|werewolves|wolf|wolves)\b",  # "a two-spy game"
                  lambda m: f"{m.group(1)} {'spies' if m.group(2).startswith('sp') else 'werewolves'}", text,
                  flags=re.IGNORECASE)
    text, seats = _TWO_SEATS.subn("2 名玩家", text)
    if seats:
        notes.append("Read '两人' / '双人' (two-person game) as 2 players.")
    text, bare = _BARE_PEOPLE.subn(lambda m: f"{m.group(1)}{m.group(2)} 名玩家", text)
    text, standard = re.subn(r"(\d+)\s*人\s*标准(局|场|板)", r"\1 名玩家标准\2", text)  # "9 人标准局"
    text, spoken = re.subn(r"(\d+)\s*个人(?=那种|的局)", r"\1 名玩家", text)  # "12个人那种"
    standard += spoken
    if bare + standard:
        notes.append("Read a bare 'N 人' (alone in its part or before a role count, '6 人 1 卧底') as N players.")
    return text, notes
