"""Common misspellings of the words the offline rules key on ("bacth size", "learing rate", "civilans"), read as
the word meant before any rule runs, each one said in a note.

A word is corrected only when it is one edit away from a vocabulary word (two letters swapped, one letter
missing, or one letter doubled or inserted) and is not itself a word a spec uses for something else
("layers" is not "players", "step" is not "steps"). Words shorter than five letters are left alone except
for swapped letters ("gups" -> "gpus"); paths, URLs, env vars and hyphenated names are never touched.
"""

from __future__ import annotations

import re

VOCABULARY = (
    "batch", "learning", "rate", "group", "players", "player", "spies", "civilians", "civilian", "villagers",
    "villager", "werewolves", "werewolf", "seer", "witch", "hunter", "rollouts", "rollout", "samples", "prompt",
    "prompts", "steps", "tokens", "temperature", "train", "trained", "trainable", "training", "server", "servers",
    "translation", "translator", "adversarial", "undercover", "gpus", "checkpoint", "static", "frozen", "reward",
    "rewards", "episodes", "rounds", "model", "agent", "agents", "total", "size", "save", "every", "port",
    "ports", "spy", "who", "opponent", "opponents", "generations",
)
# Real words one edit away from a vocabulary word: never "corrected".
KNOWN = frozenset(VOCABULARY) | {
    "layers", "layer", "ample", "pies", "rain", "step", "token", "sample", "trains", "trainer", "rates", "late",
    "groups", "grouped", "plays", "played", "prayers", "sever", "severs", "served", "serves", "sport", "spot",
    "post", "posts", "forts", "rounded", "modal", "models", "modes", "agents", "agency", "ever", "even",
    "seen", "seeds", "sees", "spied", "spices", "spines", "rewarded", "rewarding", "totals", "sized", "sizes",
    "saved", "saves", "statics", "frozen", "batches", "batched", "rollout", "rollouts", "prompted", "opponent",
    "trainee", "trainees", "hunters", "witches", "seers", "steep", "steer", "stems", "stops", "tokes",
    "group", "whom", "ports", "support", "model", "ratio", "switch", "twitch", "grounds", "round", "payer",
    "raining", "episode", "generation", "strain", "sere", "started", "states", "serve", "checkpoints", "froze",
    "temperatures", "translations", "village", "villages", "translate", "translated", "translator", "agented",
}
# Misspellings more than one swap, deletion or insertion away (a letter replaced, a plural formed wrongly).
COMMON = {"spys": "spies", "spyes": "spies", "wearwolves": "werewolves",
          "wherewolves": "werewolves", "villigers": "villagers", "civilains": "civilians", "oponents": "opponents",
          "oppenents": "opponents", "learnig": "learning", "temprature": "temperature", "tempreature": "temperature",
          "wolfs": "wolves", "wolfes": "wolves", "werewolfs": "werewolves", "warewolves": "werewolves",
          "werwolves": "werewolves", "warewolf": "werewolf", "werwolf": "werewolf", "spyy": "spy", "spie": "spy",
          "villagars": "villagers", "civillians": "civilians", "civilan": "civilian"}
# Whole words only: never a piece of a path, URL, env var, model name or hyphenated name.
_WORD = re.compile(r"(?<![\w/.\-])[A-Za-z]{4,}(?![\w/\-]|\.\w)")


def _edits(word: str) -> set[str]:
    """Every string one swap, deletion or insertion away from `word` (lowercase letters only)."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    swaps = {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    deletes = {a + b[1:] for a, b in splits if b} if len(word) >= 5 else set()
    inserts = {a + c + b for a, b in splits for c in letters} if len(word) >= 5 else set()
    return swaps | deletes | inserts


_FIXES: dict[str, str] = {}
for _good in VOCABULARY:
    for _typo in _edits(_good):
        inflected = any(_typo == _good + end for end in ("s", "es", "d", "ed", "r", "er", "y"))  # "translators"
        short_non_swap = len(_typo) < 5 and sorted(_typo) != sorted(_good)
        if _typo not in KNOWN and not inflected and len(_typo) >= 4 and not short_non_swap:
            _FIXES.setdefault(_typo, _good)
_FIXES.update(COMMON)


def fix_typos(text: str) -> tuple[str, list[str]]:
    """(the text with misspelled keywords corrected, one note per distinct correction)."""
    seen: dict[str, str] = {}

    def replace(m: re.Match) -> str:
        word = m.group()
        good = _FIXES.get(word.lower())
        if good is None:
            return word
        seen.setdefault(word, good)
        return good.capitalize() if word[0].isupper() else good

    fixed = _WORD.sub(replace, text)
    notes = [f"Read {', '.join(f'{typo!r} as {good!r}' for typo, good in seen.items())} (a misspelling?)."] if seen \
        else []
    return fixed, notes
