"""The cross-play table of `vibe-rl eval`: which checkpoints play, and each cell's win rate with its 95% interval.

A table has one row and one column per picked checkpoint. Cell (row, col) holds the games in which the
learner side (the project's trainable role(s)) played the row's checkpoint and the opponent side played the
column's; its value is the row side's win rate over the games that reported a bool `win` (`winrate.win_of`),
with Wilson's 95% score interval (`winrate.wilson`). Games that failed or reported no `win` are counted in
the cell (`errors`, `undecided`), never dropped silently.

Checkpoints are named the way a user thinks of them:

    initial     the model before any update (the job's model.path), step 0
    N, step_N   the checkpoint of global step N (<experiment.dir>/checkpoints/step_NNNNNN)
    latest      the newest checkpoint

Pure stdlib: the eval runner (`vibe_rl.autopilot.crossplay`) plays the games; this module only names,
counts and prints.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from vibe_rl.errors import ConfigError
from vibe_rl.swarm.observe.winrate import wilson

_STEP_DIR = re.compile(r"step_(\d+)")
_SELECTOR = re.compile(r"(?:step_?)?(\d+)")
FORMS = "'initial', a step number such as 20 (or step_20), or 'latest'"


class CrossPlayError(ConfigError):
    """A cross-play eval that cannot run as asked (no checkpoints, a missing step, an unsupported project)."""


@dataclass(frozen=True)
class Pick:
    """One checkpoint of the table: what the user wrote, the global step (0: the initial model)."""

    label: str
    step: int

    @property
    def model(self) -> str:
        """The static model name the eval server serves it under."""
        return "ckpt-initial" if self.step == 0 else f"ckpt-{self.step}"

    @property
    def title(self) -> str:
        if self.step == 0:
            return "initial"
        return f"step {self.step}" if self.label != "latest" else f"latest (step {self.step})"


def available_steps(checkpoints: Path) -> list[int]:
    """The steps of the complete checkpoints under `checkpoints` (model/ or adapter/ inside), oldest first."""
    if not checkpoints.is_dir():
        return []
    found = []
    for p in checkpoints.iterdir():
        m = _STEP_DIR.fullmatch(p.name)
        if m and p.is_dir() and ((p / "model").is_dir() or (p / "adapter").is_dir()):
            found.append(int(m.group(1)))
    return sorted(found)


def resolve(selectors: list[str], steps: list[int], checkpoints: Path) -> list[Pick]:
    """The picks of `selectors` (in order, a step named twice kept once); CrossPlayError naming the fix."""
    if not steps:
        raise CrossPlayError(
            f"No checkpoint in {checkpoints}: a cross-play eval needs at least one. Train first with checkpoints "
            "on (train.save_freq > 0, e.g. `vibe-rl run DIR --until steps:10 --set train.save_freq=5`), or point "
            "--experiment-dir at the experiment that holds them.")
    if not selectors:
        raise CrossPlayError(f"No checkpoint named: pass --checkpoints with {FORMS}, e.g. --checkpoints initial latest")
    picks: list[Pick] = []
    for raw in selectors:
        text = raw.strip().lower()
        if text == "initial":
            step = 0
        elif text == "latest":
            step = steps[-1]
        elif (m := _SELECTOR.fullmatch(text)) is not None:
            step = int(m.group(1))
            if step not in steps:
                raise CrossPlayError(f"Checkpoint {raw!r}: {checkpoints} holds no step_{step:06d}. Available steps: "
                                     f"{steps} (or 'initial', 'latest'), e.g. --checkpoints initial {steps[-1]}")
        else:
            raise CrossPlayError(f"Checkpoint {raw!r} is not one of {FORMS}; available steps: {steps}")
        if step not in {p.step for p in picks}:
            picks.append(Pick(text if text in ("initial", "latest") else str(step), step))
    return picks


@dataclass
class Cell:
    """The games of one (row, column) pair."""

    row: str
    col: str
    wins: int = 0
    games: int = 0  # games that reported a bool win: the win rate's n
    undecided: int = 0  # games that ended without a bool `win` in their metadata
    errors: int = 0  # games that failed (their first error is in `error`)
    error: str = ""

    def add(self, win: bool | None) -> None:
        if win is None:
            self.undecided += 1
        else:
            self.games += 1
            self.wins += int(win)

    def fail(self, exc: BaseException) -> None:
        self.errors += 1
        self.error = self.error or f"{type(exc).__name__}: {exc}"[:500]

    def rate(self) -> tuple[float, float, float] | None:
        """(win rate, lo, hi) or None when no game reported a win."""
        if not self.games:
            return None
        lo, hi = wilson(self.wins, self.games)
        return self.wins / self.games, lo, hi

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        r = self.rate()
        out.update(win_rate=None, lo=None, hi=None) if r is None else \
            out.update(win_rate=round(r[0], 6), lo=round(r[1], 6), hi=round(r[2], 6))
        return out


def _title(p: dict[str, Any]) -> str:
    return Pick(p["label"], p["step"]).title


def _show(cell: dict[str, Any]) -> str:
    text = "-" if cell["win_rate"] is None else \
        f"{cell['win_rate']:.2f} [{cell['lo']:.2f}, {cell['hi']:.2f}] n={cell['games']}"
    return text + (f" ({cell['errors']} failed)" if cell["errors"] else "")


def table_text(table: dict[str, Any]) -> str:
    """A `table_json` object as text: rows = the learner side's checkpoint, columns = the opponent's, each cell
    'p [lo, hi] n=games' of the row side's win rate; '-' for a cell without a decided game."""
    head = [f"{table.get('side', 'row')} \\ opponent"] + [_title(c) for c in table["cols"]]
    body = [[_title(r)] + [_show(cell) for cell in line] for r, line in zip(table["rows"], table["cells"], strict=True)]
    widths = [max(len(line[i]) for line in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in [head, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def table_json(picks: list[Pick], cols: list[Pick], cells: dict[tuple[str, str], Cell], **info: Any) -> dict[str, Any]:
    """The table as one JSON object: the rows, the columns, and cells[i][j] for row i and column j."""
    def named(p: Pick) -> dict[str, Any]:
        return {"label": p.label, "step": p.step, "model": p.model}

    return {**info, "rows": [named(p) for p in picks], "cols": [named(c) for c in cols],
            "cells": [[cells[(r.model, c.model)].as_dict() for c in cols] for r in picks]}
