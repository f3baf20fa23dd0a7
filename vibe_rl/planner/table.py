"""Declarative field tables and the one reader that reads them.

A row names a plan field, its words (regex fragments: `en` words match whole words, `zh` fragments anywhere,
and a fragment may carry its own lookaround), its type, its range and its units. The reader sets the field
from a number only where one of its words stands next to it in the same part of a clause, with only linking
words ("is", "of", "=", "：", "为", "around", "大约", ...) between: "batch size 16", "lr=2e-6", "学习率 1e-5",
"16 tasks per batch" (a word after the number), "训练 300 步" (a word before, a unit after). So adding a field
is one row (a family's rows are in its manifest: `parameters.<name>.words`). The first phrasing that reads a
value wins; its number is marked as understood and its span is the field's source (the review table shows
it). A field said twice with different values keeps the first and notes the others, which stay not understood.
A negative number is read too, so that the plan refuses it with the field named (instead of hiding it).

The tables are `fields.yaml` next to this file, read once: shared regex fragments (`<<name>>` in a word), one
row per training field (`TRAINING`: "lr=5e-6", "8 samples per prompt", "每个 prompt 采样 8 条", "stop training
at 300 steps", "bsz=64", "GRPO (G=8)"), the game parameters every family may have (`GAME`), and settings the
plan has no field for (`UNPLACED`: LoRA, KL, warmup, gradient accumulation, tensor parallelism, ...), each
with a note naming the config key to edit after rendering (their numbers stay in `unparsed`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from vibe_rl.planner.text import CN_NUMBER, WORD_NUMBER, SpecText, to_int

# What may stand between a field's word and its number
LINK = (r"[ \t]*(?:(?:of|is|are|=|:|：|为|是|设为|设置为|设成|to|at|at most|up to|最多|至多|不超过|around|about|roughly|approximately|approx\.?|circa|~|≈|"
        r"still|equals?|大约|大概|约|还是|仍是|仍然|依旧|照旧|用|取|给)[ \t]*)*")
_DIGITS = (r"(?<![A-Za-z0-9_.])(?<![\d.][eE]-)-?\d+(?:\.\d+)?(?:e[-+]?\d+)?(?![A-Za-z0-9_.]*[A-Za-z_/%])(?!\.\d)"
           r"(?![零一二两三四五六七八九十百千万])")
NUMBER = rf"(?P<num>{_DIGITS}|{CN_NUMBER}|{WORD_NUMBER})"
_PART_END = r"[,，;；。\n(（)）]|\.(?![\dA-Za-z])"


@dataclass(frozen=True)
class Row:
    """One field: where it goes, the words that name it, its type, its range and the units after its number."""

    field: str
    en: tuple[str, ...] = ()
    zh: tuple[str, ...] = ()
    type: type = int
    min: float | None = None
    max: float | None = None
    unit: tuple[str, ...] = ()
    after: tuple[str, ...] = ()  # words that name the field when they follow the number

    def words(self) -> str:
        return "|".join([*(rf"(?<![A-Za-z0-9-]){w}(?![A-Za-z0-9])" for w in self.en), *self.zh])

    def cast(self, raw: str) -> Any:
        if re.fullmatch(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?", raw, re.IGNORECASE):
            value = float(raw)
            return int(value) if self.type is int and value.is_integer() else self.type(value)
        return self.type(to_int(raw))


def patterns(row: Row) -> list[str]:
    """The row as patterns: its word, linking words, its number (and a unit); or its number, then a word."""
    unit = "|".join(row.unit)
    tail = rf"(?:[ \t]*(?:{unit})(?![A-Za-z]))?" if unit else ""
    out = [rf"(?:{row.words()}){LINK}{NUMBER}{tail}"] if row.en or row.zh else []
    if row.after:  # an English word whole, also hyphenated ("an 8-round cap"); not "每 3 轮", "第 3 轮"
        after = "|".join(rf"{w}(?![A-Za-z0-9])" if re.match(r"[A-Za-z]", w) else w for w in row.after)
        out.append(rf"(?<![每第同])(?<![每第同]\s){NUMBER}(?:[ \t]*|-)(?:{after})")
    return out


def read(src: SpecText, rows: Iterable[Row], notes: list[str], taken: list[tuple[int, int]] | None = None,
         prefix: str = "") -> dict[str, Any]:
    """field -> value for every row the spec states; each read number marked and its span the field's source.
    A number is read once: a later row never takes a number an earlier one took (`taken` collects the spans)."""
    taken = [] if taken is None else taken
    values: dict[str, Any] = {}
    for row in rows:
        found: list[tuple[int, int, int, int, Any]] = []
        for m in (m for pattern in patterns(row) for m in src.finditer(pattern)):
            a, b = m.span("num")
            held = taken + [(x, y) for _, _, x, y, _ in found]
            if not re.search(_PART_END, m.group()[:-1] if m.end() > b else m.group()) and not any(
                    x < b and a < y for x, y in held):
                with suppress(ValueError, KeyError):  # a word the numbers do not know
                    found.append((m.start(), m.end(), a, b, row.cast(m.group("num"))))
        if not found:
            continue
        first = values[row.field] = found[0][4]
        src.source(prefix + row.field, *found[0][:2])
        for start, end, a, b, value in found:
            if value == first:
                src.mark(start, end)
                taken.append((a, b))
        others = sorted({str(v) for *_, v in found if v != first})
        if others:
            notes.append(f"The spec gives {row.field} more than once ({', '.join([str(first), *others])}): using "
                         f"{first}; the others are listed as not understood. Say it once.")
    return values


def words_of(field_name: str, rows: Iterable[Row]) -> str | None:
    """The words of a field (a regex), or None when no row names it."""
    row = next((r for r in rows if r.field == field_name), None)
    return None if row is None else "|".join(x for x in (row.words(), "|".join(row.after)) if x)


def _table() -> tuple[list[Row], list[Row], list[tuple[str, str]]]:
    """fields.yaml's training rows, game rows and unplaced (pattern, note) pairs, fragments substituted."""
    data = yaml.safe_load(Path(__file__).with_name("fields.yaml").read_text(encoding="utf-8"))
    fragments: dict[str, str] = {}

    def sub(text: str) -> str:  # <<name>> -> its fragment (one defined before, when a fragment refers to one)
        return re.sub(r"<<(\w+)>>", lambda m: fragments[m.group(1)], text)

    for name, value in data["fragments"].items():
        fragments[name] = sub("|".join(value) if isinstance(value, list) else value)

    def row(entry: dict[str, Any]) -> Row:
        words = {k: tuple(map(sub, entry[k])) for k in ("en", "zh", "unit", "after") if k in entry}
        return Row(**{**entry, **words, "type": {"int": int, "float": float}[entry.get("type", "int")]})

    return ([row(e) for e in data["training"]], [row(e) for e in data["game"]],
            [(sub(e["pattern"]), e["note"]) for e in data["unplaced"]])


TRAINING, GAME, UNPLACED = _table()  # the module docstring's tables


def unplaced_notes(src: SpecText) -> list[str]:
    """The note of every unplaced setting the spec names, with the rank it says ("r=16") where a note asks."""
    rank = re.search(r"(?:rank|\br)\s*(?:of|=|:)?\s*(\d+)", src.text, re.IGNORECASE)
    said = f" (the spec says {rank.group(1)})" if rank else ""
    return [note.format(rank=said) for pattern, note in UNPLACED if re.search(pattern, src.text, re.I)]
