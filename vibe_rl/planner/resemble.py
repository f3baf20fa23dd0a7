"""A spec whose game resembles a template family without being it ("Mafia (like werewolves)", "a werewolf-like
game", "类似狼人杀的游戏", "a social deduction game like Avalon").

The offline planner plans a family only when the spec names it, so a game compared to a family is planned as
that family (the spec says it is close enough) with a note that the game differs and what the plan holds
instead. A game compared to something no family covers stays a PlannerError, which then says how to plan it
as the closest family anyway.
"""

from __future__ import annotations

import re

from vibe_rl.scaffold.families import Manifest

# "X like Y" and its kin (not "would like to", "unlike")
_LIKE = (r"(?<!would )(?<!'d )(?<!\bi )(?<!\bwe )\blike\b(?!\s+(?:to|this|that)\b)|\bsimilar\s+to\b|"
         r"\bresembl(?:es|ing)\b|\b(?:a\s+)?(?:variant|version|clone|twist|spin[\s-]*off)\s+(?:of|on)\b|"
         r"\bbased\s+on\b|\binspired\s+by\b|\bmodell?ed\s+(?:on|after)\b|\bakin\s+to\b|\bin\s+the\s+style\s+of\b|"
         r"\bà\s+la\b|\bplan(?:ned)?\s+(?:it|this|the\s+game)\s+as\b|\btreat(?:ed)?\s+(?:it|this|the\s+game)\s+as\b|"
         r"类似于?|仿照|改编自|借鉴")  # "像X一样的游戏" is a suffix form: "像预言家这样的神职" names roles
_SUFFIX = r"(?:-like\b|[\s-](?:style|type)\b|-ish\b|\s*(?:风格|类|式的|一样的|那样的|的变体|的变种|的改版))"  # "werewolf-like"
_GAME = r"\bgames?\b|游戏|桌游|\bvariant\b|\bversion\b"
_SEPARATORS = r"[,，.。;；:：\n]"
_SENTENCE = r"[.。;；\n]"


def _keyword_after(text: str, position: int, keywords: list[str]) -> str | None:
    """A family keyword within the next few words after `position` (before the segment ends)."""
    window = re.split(_SEPARATORS, text[position:position + 40])[0].lower()
    window = re.sub(r"[\s_-]+", " ", window)
    hits = [(window.find(k), -len(k), k) for k in keywords if k in window]
    return min(hits)[2] if hits else None  # the first one, the longest there ("狼人杀", not "狼人")


def _name_before(text: str, position: int) -> str | None:
    """The game the spec compares: a capitalised name or a Chinese name right before the comparison, or the
    phrase ending in 'game' ("Mafia (like werewolves)", "Secret Hitler, similar to werewolves", "a social
    deduction game like Avalon")."""
    before = re.split(_SENTENCE, text[max(0, position - 60):position])[-1].rstrip(" (（,，")
    name = re.search(r"((?:[A-Z][\w'-]*\s+){0,3}[A-Z][\w'-]*)\s*$", before)
    if name and not re.fullmatch(r"(?:I|We|A|An|The|Train|Plan|Use|It|This)", name.group(1)):
        return name.group(1)
    game = re.search(r"(?:\b(?:a|an|the)\s+)?((?:[\w-]+\s+){0,3}game)\s*$", before, re.IGNORECASE)
    if game:
        return game.group(1)
    return None


def _name_called(text: str, start: int, end: int) -> str | None:
    """A name the sentence gives the game: "叫血染钟楼", "called Blood on the Clocktower", "类似谁是卧底的阿瓦隆"."""
    sentence = re.split(_SENTENCE, text[start:end])[0]
    called = re.search(r"(?:叫做?|名为|名叫|\bcalled\b|\bnamed\b)\s*[“\"「]?((?:[A-Z][\w'-]*\s?){1,4}|[\u4e00-\u9fff]{2,8})",
                       sentence)
    if called:
        return called.group(1).strip()
    after = re.match(r"[^，,的]{1,12}的([\u4e00-\u9fff]{2,6}?)(?:[，,。；;\s]|$)", sentence)
    return after.group(1) if after and after.group(1) not in ("游戏", "桌游", "玩法", "规则", "版本") else None


def comparisons(text: str, keywords: list[str]) -> list[tuple[str | None, str]]:
    """(the game compared, the keyword it is compared to) for every comparison of a game to one of `keywords`."""
    lower_keys = sorted({re.sub(r"[\s_-]+", " ", k.lower()) for k in keywords}, key=len, reverse=True)
    out: list[tuple[str | None, str]] = []
    for m in re.finditer(_LIKE, text, re.IGNORECASE):
        keyword = _keyword_after(text, m.end(), lower_keys)
        before = re.split(_SENTENCE, text[max(0, m.start() - 40):m.start()])[-1]
        name = _name_called(text, m.end(), len(text)) or _name_before(text, m.start())
        gamey = (re.search(_GAME, before + text[m.end():m.end() + 40], re.IGNORECASE) or re.match(r"[^\x00-\x7f]", m.group())
                 or before.rstrip().endswith(("(", "（")) or re.search(r"plan|treat", m.group(), re.IGNORECASE)
                 or (name and name[:1].isupper()))
        own = name and re.sub(r"\b(?:the|classic|game)\b|[\s_-]+", " ", name.lower()).strip() in lower_keys
        if keyword and gamey and not own:  # "Werewolves (like the classic mafia game)" is the family's own game
            out.append((name, keyword))
    for keyword in lower_keys:
        for m in re.finditer(rf"{re.escape(keyword)}{_SUFFIX}", text, re.IGNORECASE):
            out.append((_name_called(text, m.end(), len(text)), keyword))
    return out


def differs_note(text: str, chosen: Manifest) -> list[str]:
    """A note when the spec's game is only like the chosen family's: the plan holds that family's game."""
    found = comparisons(text, chosen.all_keywords())
    if not found:
        return []
    name, keyword = next(((n, k) for n, k in found if n), found[0])
    game = f"The spec's game ({name})" if name else "The spec's game"
    rules = "game_engine.py" if any((chosen.path / "project" / f).exists() for f in ("game_engine.py",
                                                                                     "game_engine.py.j2")) \
        else "the game's rules"
    what = chosen.description.split(";")[0].strip()
    what += ")" * (what.count("(") - what.count(")"))
    return [f"{game} is not the {chosen.name} family's game: the spec compares it to {keyword!r}, so it is planned "
            f"as that closest family and keeps its rules ({what}). Edit {rules} after rendering to play your "
            f"game, or render the generic skeleton with `--family turn_based` and write its rules."]


# Games no family covers that play like one: (pattern, game, family, how the roles map)
RELATIVES = [
    (r"\bmafia\b|黑手党", "Mafia", "werewolves",
     "the mafia are the werewolves, the detective the seer, the doctor the witch"),
]


def relative_game_hint(text: str, families: list[Manifest]) -> str:
    """For the 'no family' error: a known game that plays like a family, and how to plan it as that family."""
    names = {f.name for f in families}
    for pattern, game, family, mapping in RELATIVES:
        if family in names and re.search(pattern, text, re.IGNORECASE):
            return (f"The spec names {game}, which plays like the {family} family ({mapping}). To plan it as "
                    f"{family}, pass --family {family} or write 'like {family}' in the spec; the plan then notes "
                    "what differs.\n")
    return ""


def unknown_game_hint(text: str, families: list[Manifest]) -> str:
    """For the 'no family' error: the game the spec compares its own to, and how to plan the closest family."""
    relative = relative_game_hint(text, families)
    if relative:
        return relative
    m = re.search(rf"(?:{_LIKE}|像)\s*(?:the\s+)?([A-Z][\w'-]*(?:\s+[A-Z][\w'-]*){{0,2}}|[\u4e00-\u9fff]{{2,6}}?)"
                  r"(?=一样|那样|之类|的|类|游戏|[\s,，.。;；]|$)", text,
                  re.IGNORECASE)
    if not m:
        return ""
    return (f"The spec compares its game to {m.group(1).strip()}, which no family covers. To plan it as the "
            f"closest family anyway, say so in the spec ('like werewolves', 'plan it as who is spy') or pass "
            f"--family ({', '.join(f.name for f in families)}); the plan then notes what differs.\n")
