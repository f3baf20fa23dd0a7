"""The offline planner: picks a template family by its manifest keywords (a family is planned only when the
spec names it), then applies its rules, `templates/<family>/rules.py` (`build(facts, manifest) -> TaskSpec`),
loaded from that file by path: library code never imports `templates/` as a package. Every number, path, env
var or model name of the spec that did not land in the TaskSpec is then listed in `TaskSpec.unparsed`.

A game that only resembles a family's ("Mafia (like werewolves)", "类似狼人杀的游戏") is planned as that family
with a note that the game differs and what the plan holds instead; a game compared to something no family
covers stays a PlannerError that says how to plan it as the closest family anyway.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Iterator
from types import ModuleType

from pydantic import ValidationError

from vibe_rl.errors import PlannerError, TemplateError
from vibe_rl.planner.background import blank_background, check_supported
from vibe_rl.planner.common import check_gpu_budget
from vibe_rl.planner.corrections import apply_corrections
from vibe_rl.planner.facts import extract, rewrite_counts
from vibe_rl.planner.numbers import rewrite_grouped, rewrite_nodes, rewrite_scientific
from vibe_rl.planner.terse import expand_terse, fix_typos
from vibe_rl.planner.text import strings_of
from vibe_rl.scaffold.families import Manifest, family_words, list_families
from vibe_rl.schema.spec import TaskSpec

# The rewrites before any rule reads the spec, in order: background blanked, layouts and misspellings as prose,
# unsupported asks refused, then count, number, node and correction phrasings as plain values
REWRITES = (blank_background, expand_terse, fix_typos, check_supported, rewrite_counts, rewrite_scientific,
            rewrite_grouped, rewrite_nodes, apply_corrections)
HOW_TO_GO_FURTHER = (
    "To go further: render the generic skeleton with `--family turn_based` and write its rules module, use an "
    "LLM planner (`--planner openai` with OPENAI_API_KEY, or `--planner anthropic` with ANTHROPIC_API_KEY), or "
    "follow the vibe-rl-new skill (skills/vibe-rl-new) to write a new template family: templates/<family>/ "
    "(manifest.yaml, rules.py, project/).")


def pick_family(text: str, families: list[Manifest]) -> tuple[Manifest, list[str]]:
    """The family whose keywords occur most often in the text (case, hyphens, underscores aside: "Who-is-Spy"
    is "who is spy"; none: a PlannerError listing the families), and a note if others' keywords occur too."""
    words = _words(f" {text}")  # a keyword may start with a space (" wolves": never in "werewolves")
    scores = sorted([(sum(words.count(_words(k)) for k in m.all_keywords()), m.name, m) for m in families],
                    key=lambda item: item[:2], reverse=True)
    if (not scores or scores[0][0] == 0) and (skeleton := turn_based_game(text)):
        return skeleton
    if not scores or scores[0][0] == 0:
        lines = "\n".join(f"  - {m.name}: {m.description}" for m in families) or "  (none found)"
        raise PlannerError("The offline planner does not know the game or task of this spec: no template family's "
                           f"keywords occur in it.\n{unknown_game_hint(text, families)}Families it knows:\n{lines}\n"
                           f"{HOW_TO_GO_FURTHER}")
    chosen = scores[0][2]
    others = [f"{name} ({hits})" for hits, name, _ in scores if hits and name != chosen.name]
    tie = len(scores) > 1 and scores[1][0] == scores[0][0]
    why = " (as many hits: check that this is the game you mean)" if tie else ", the family named most"
    note = (f"The spec also names {', '.join(others)} (keyword hits); planned as {chosen.name} only{why}. "
            "Plan the other one with its own spec, or pass --family to choose.")
    return chosen, [note] if others else []


def turn_based_game(text: str) -> tuple[Manifest, list[str]] | None:
    """The generic skeleton (a family without keywords) and its note, when the spec names a turn-based game
    its words list ("tic-tac-toe", "Nim", "liar's dice", "回合制") and no family's keywords occur; the game of a
    "game:" line is the one named, else the first."""
    for skeleton in (f for f in list_families() if not f.keywords):
        words = family_words(skeleton.path)
        games = "|".join(f"(?:{words[k]})" for k in ("two_player_games", "turn_based_games") if k in words)
        named = list(re.finditer(games, text, re.IGNORECASE)) if games else []
        keyed = [m for m in named if re.search(r"\bgame\s*[:：=]\s*$", text[text.rfind("\n", 0, m.start()) + 1:m.start()], re.I)]
        if game := (keyed or named or [None])[0]:  # "game: Connect Four" before "run 11 (tic-tac-toe)"
            return skeleton, [f"The spec names {game.group()!r}, a turn-based game no family plans by itself: planned "
                              f"with the generic {skeleton.name} skeleton (seats, turns and rewards). Its project "
                              "plays a placeholder game (Nim) until you write your game's rules in game_rules.py."]
    return None


def _words(text: str) -> str:
    return re.sub(r"[\s_-]+", " ", text.lower())


def load_rules(manifest: Manifest) -> ModuleType:
    """Import `templates/<family>/rules.py` from its file (a private module name per family)."""
    path = manifest.path / "rules.py"
    if not path.is_file():
        raise PlannerError(f"Template family {manifest.name} has no offline rules ({path}). {HOW_TO_GO_FURTHER}")
    name = f"_vibe_rl_rules_{manifest.name}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and typing need the module registered while it executes
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise PlannerError(f"{path} failed to load: {type(exc).__name__}: {exc}. Fix the rules file.") from exc
    if not callable(getattr(module, "build", None)):
        raise PlannerError(f"{path} has no build(facts, manifest) -> TaskSpec function.")
    return module


class OfflinePlanner:
    """Rules only: no network, deterministic."""

    name = "offline"
    read = None  # the marked SpecText of the last plan (vibe_rl.planner.review reads its sources)

    def plan(self, text: str, family: str | None = None) -> TaskSpec:
        """The rewrites, then the rules of `family` (else of the family the spec names); their notes first."""
        if not text.strip():
            raise PlannerError("The spec is empty. Describe the task, e.g. vibe-rl new \"who is spy, 8 GPUs, batch 16\".")
        notes: list[str] = []
        for rewrite in REWRITES:
            text, said = rewrite(text)
            notes += said
        families = list_families()
        if family is None:
            manifest, also = pick_family(text, [m for m in families if m.keywords])
            notes += differs_note(text, manifest) + also
        elif (manifest := next((m for m in families if m.name == family), None)) is None:
            raise PlannerError(f"--family {family}: no such template family; families: "
                               f"{', '.join(m.name for m in families)}.")
        facts = extract(text)
        facts.notes[:0] = notes
        try:
            spec = load_rules(manifest).build(facts, manifest)
        except ValidationError as exc:  # a number the spec gave that the plan cannot hold ("batch 0")
            wrong = "; ".join(f"{'.'.join(str(p) for p in e['loc'])} = {e.get('input')!r}: {e['msg']}"
                              for e in exc.errors())
            raise PlannerError(f"The spec asks for a value the plan cannot take ({wrong}). Change it in the "
                               "spec, or plan with --dry-run --json, fix task_spec.json and render it with "
                               "`vibe-rl new --plan`.") from None
        except TemplateError as exc:  # a game parameter outside the family's bounds
            raise PlannerError(str(exc)) from None
        unparsed = facts.src.unparsed(strings_of(spec.model_dump(mode="json")))
        notes = list(spec.notes)
        check_gpu_budget(spec.gpus, {m.name: {s.name: m.gpus.get(s.name, s.gpus) for s in spec.servers
                                      if s.name in m.servers} for m in spec.modes}, notes)
        self.read = facts.src
        return spec.model_copy(update={"unparsed": unparsed, "notes": notes})


# "X like Y" and its kin (not "would like to", "unlike")
_LIKE = (r"(?<!would )(?<!'d )(?<!\bi )(?<!\bwe )\blike\b(?!\s+(?:to|this|that)\b)|\bsimilar\s+to\b|"
         r"\bresembl(?:es|ing)\b|\b(?:a\s+)?(?:variant|version|clone|twist|spin[\s-]*off)\s+(?:of|on)\b|"
         r"\bbased\s+on\b|\binspired\s+by\b|\bmodell?ed\s+(?:on|after)\b|\bakin\s+to\b|\bin\s+the\s+style\s+of\b|"
         r"\bà\s+la\b|\bplan(?:ned)?\s+(?:it|this|the\s+game)\s+as\b|\btreat(?:ed)?\s+(?:it|this|the\s+game)\s+as\b|"
         r"类似于?|仿照|改编自|借鉴")  # "像X一样的游戏" is a suffix form: "像预言家这样的神职" names roles
_SUFFIX = r"(?:-like\b|[\s-](?:style|type)\b|-ish\b|\s*(?:风格|类|式的|一样的|那样的|的变体|的变种|的改版))"  # "werewolf-like"
_GAME = r"\bgames?\b|游戏|桌游|\bvariant\b|\bversion\b"
_SENTENCE = r"[.。;；\n]"


def _name_before(text: str, position: int) -> str | None:
    """The game the spec compares: a capitalised name right before the comparison, or the phrase ending in
    'game' ("Mafia (like werewolves)", "a social deduction game like Avalon")."""
    before = re.split(_SENTENCE, text[max(0, position - 60):position])[-1].rstrip(" (（,，")
    name = re.search(r"((?:[A-Z][\w'-]*\s+){0,3}[A-Z][\w'-]*)\s*$", before)
    if name and not re.fullmatch(r"(?:I|We|A|An|The|Train|Plan|Use|It|This)", name.group(1)):
        return name.group(1)
    game = re.search(r"(?:\b(?:a|an|the)\s+)?((?:[\w-]+\s+){0,3}game)\s*$", before, re.IGNORECASE)
    return game.group(1) if game else None


def _name_called(text: str, start: int) -> str | None:
    """A name the sentence gives the game: "叫血染钟楼", "called Blood on the Clocktower", "类似谁是卧底的阿瓦隆"."""
    sentence = re.split(_SENTENCE, text[start:])[0]
    if called := re.search(r"(?:叫做?|名为|名叫|\bcalled\b|\bnamed\b)\s*[“\"「]?"
                           r"((?:[A-Z][\w'-]*\s?){1,4}|[\u4e00-\u9fff]{2,8})", sentence):
        return called.group(1).strip()
    after = re.match(r"[^，,的]{1,12}的([\u4e00-\u9fff]{2,6}?)(?:[，,。；;\s]|$)", sentence)
    return after.group(1) if after and after.group(1) not in ("游戏", "桌游", "玩法", "规则", "版本") else None


def comparisons(text: str, keywords: list[str]) -> Iterator[tuple[str | None, str]]:
    """(the game compared, the keyword it is compared to) for every comparison of a game to one of `keywords`:
    the first keyword in the next few words (before the segment ends), the longest there ("狼人杀", not "狼人")."""
    lower_keys = sorted({_words(k) for k in keywords}, key=len, reverse=True)
    for m in re.finditer(_LIKE, text, re.IGNORECASE):
        window = _words(re.split(r"[,，.。;；:：\n]", text[m.end():m.end() + 40])[0])
        hits = [(window.find(k), -len(k), k) for k in lower_keys if k in window]
        keyword = min(hits, default=(0, 0, None))[2]
        before = re.split(_SENTENCE, text[max(0, m.start() - 40):m.start()])[-1]
        name = _name_called(text, m.end()) or _name_before(text, m.start())
        gamey = (re.search(_GAME, before + text[m.end():m.end() + 40], re.IGNORECASE) or re.match(r"[^\x00-\x7f]", m.group())
                 or before.rstrip().endswith(("(", "（")) or re.search(r"plan|treat", m.group(), re.IGNORECASE)
                 or (name and name[:1].isupper()))
        own = name and re.sub(r"\b(?:the|classic|game)\b|[\s_-]+", " ", name.lower()).strip() in lower_keys
        if keyword and gamey and not own:  # "Werewolves (like the classic mafia game)" is the family's own game
            yield name, keyword
    for keyword in lower_keys:
        for m in re.finditer(rf"{re.escape(keyword)}{_SUFFIX}", text, re.IGNORECASE):
            yield _name_called(text, m.end()), keyword


def differs_note(text: str, chosen: Manifest) -> list[str]:
    """A note when the spec's game is only like the chosen family's: the plan holds that family's game."""
    if not (found := list(comparisons(text, chosen.all_keywords()))):
        return []
    name, keyword = next(((n, k) for n, k in found if n), found[0])
    game = f"The spec's game ({name})" if name else "The spec's game"
    engine = any((chosen.path / "project" / f).exists() for f in ("game_engine.py", "game_engine.py.j2"))
    rules = "game_engine.py" if engine else "the game's rules"
    what = chosen.description.split(";")[0].strip()
    what += ")" * (what.count("(") - what.count(")"))
    return [f"{game} is not the {chosen.name} family's game: the spec compares it to {keyword!r}, so it is planned "
            f"as that closest family and keeps its rules ({what}). Edit {rules} after rendering to play your "
            f"game, or render the generic skeleton with `--family turn_based` and write its rules."]


# Games no family covers that play like one: (pattern, game, family, how the roles map)
RELATIVES = [(r"\bmafia\b|黑手党", "Mafia", "werewolves",
              "the mafia are the werewolves, the detective the seer, the doctor the witch")]


def unknown_game_hint(text: str, families: list[Manifest]) -> str:
    """For the 'no family' error: a known game that plays like a family, else the game the spec compares its
    own to; and how to plan it as that (or the closest) family."""
    for pattern, game, family, mapping in RELATIVES:
        if family in {f.name for f in families} and re.search(pattern, text, re.IGNORECASE):
            return (f"The spec names {game}, which plays like the {family} family ({mapping}). To plan it as "
                    f"{family}, pass --family {family} or write 'like {family}' in the spec; the plan then notes "
                    "what differs.\n")
    m = re.search(rf"(?:{_LIKE}|像)\s*(?:the\s+)?([A-Z][\w'-]*(?:\s+[A-Z][\w'-]*){{0,2}}|[\u4e00-\u9fff]{{2,6}}?)"
                  r"(?=一样|那样|之类|的|类|游戏|[\s,，.。;；]|$)", text, re.IGNORECASE)
    return "" if not m else (
        f"The spec compares its game to {m.group(1).strip()}, which no family covers. To plan it as the "
        f"closest family anyway, say so in the spec ('like werewolves', 'plan it as who is spy') or pass "
        f"--family ({', '.join(f.name for f in families)}); the plan then notes what differs.\n")
