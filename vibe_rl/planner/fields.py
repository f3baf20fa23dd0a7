"""The training numbers of a spec (TaskSpec.training): each field with the phrasings people use for it.

A field is read where its name and a number meet (vibe_rl.planner.table): "batch size 16", "lr=5e-6", "学习率
1e-5", "8 samples per prompt", "rollouts_per_prompt: 8", "each prompt gets 8 rollouts", "每个 prompt 采样 8 条",
"每局重复 8 次", "stop training at 300 steps", keys "bsz=64", "n_samples=16", "GRPO (G=8)". A negative number
is read too, so that the plan refuses it with the field named (instead of keeping the default and hiding it).

Settings the plan has no field for (LoRA, KL, warmup, gradient accumulation, tensor parallelism, entropy bonus,
prompt length, GPU memory fraction, eval frequency, loggers, ...) get a note naming the config key to edit after
rendering; their numbers stay in `unparsed`.

The table itself is `fields.yaml` next to this file: shared regex fragments (`<<name>>` in a word), one row per
field, and the unplaced settings with their notes. This module reads it once and builds the rows.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import yaml

from vibe_rl.planner.table import Row
from vibe_rl.planner.text import SpecText

_TYPES = {"int": int, "float": float}
_WORDS = ("en", "zh", "unit", "after")


@functools.cache
def _table() -> dict[str, Any]:
    """fields.yaml read: its rows as Row objects and its unplaced (pattern, note) pairs, fragments substituted."""
    data = yaml.safe_load(Path(__file__).with_name("fields.yaml").read_text(encoding="utf-8"))
    fragments: dict[str, str] = {}

    def sub(text: str) -> str:  # <<name>> -> its fragment (one defined before, when a fragment refers to one)
        return re.sub(r"<<(\w+)>>", lambda m: fragments[m.group(1)], text)

    for name, value in data["fragments"].items():
        fragments[name] = sub("|".join(value) if isinstance(value, list) else value)

    def row(entry: dict[str, Any]) -> Row:
        words = {k: tuple(map(sub, entry[k])) for k in _WORDS if k in entry}
        return Row(**{**entry, **words, "type": _TYPES[entry.get("type", "int")]})

    return {"training": [row(e) for e in data["training"]], "game": [row(e) for e in data["game"]],
            "unplaced": [(sub(e["pattern"]), e["note"]) for e in data["unplaced"]]}


# The training fields (TaskSpec.training): one row each. Words are regex fragments (vibe_rl.planner.table).
TRAINING: list[Row] = _table()["training"]
# Game parameters every family may have (a family's own rows are in its manifest: parameters.<name>.words)
GAME: list[Row] = _table()["game"]
# Settings people name that the plan has no field for: (pattern, what to do). Their numbers stay unparsed.
UNPLACED: list[tuple[str, str]] = _table()["unplaced"]


def unplaced_notes(src: SpecText) -> list[str]:
    rank = re.search(r"(?:rank|\br)\s*(?:of|=|:)?\s*(\d+)", src.text, re.IGNORECASE)
    said = f" (the spec says {rank.group(1)})" if rank else ""
    return [note.format(rank=said) for pattern, note in UNPLACED if re.search(pattern, src.text, re.I)]
