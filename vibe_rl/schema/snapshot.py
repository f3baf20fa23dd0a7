"""The `source` of a static model that plays a past checkpoint of the trainable model.

    checkpoint:latest        the newest checkpoint (re-read at each episode's first call)
    checkpoint:step:N        the checkpoint of global step N
    checkpoint:pool:last-K   one of the K newest checkpoints, drawn uniformly per episode
    checkpoint:pool:last-K:by-win-rate
                             one of the K newest, drawn with weight (1 - p)^2, p the learner's smoothed win
                             rate against that checkpoint so far: the opponents it still loses to play more
                             (prioritized fictitious self-play; see swarm/server/snapshots.py)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

FORMS = ("'checkpoint:latest', 'checkpoint:step:N' (N >= 1) or 'checkpoint:pool:last-K' (K >= 1, uniform; "
         "'checkpoint:pool:last-K:by-win-rate' weighs the checkpoints the learner loses to)")
_PATTERN = re.compile(r"checkpoint:(?:(latest)|step:(\d+)|pool:last-(\d+)(:by-win-rate)?)")


@dataclass(frozen=True)
class SnapshotSource:
    kind: Literal["latest", "step", "pool"]
    step: int = 0  # kind 'step'
    last: int = 0  # kind 'pool': how many of the newest checkpoints
    by_win_rate: bool = False  # kind 'pool': weighted by the learner's win rate against each, else uniform

    def __str__(self) -> str:
        if self.kind == "latest":
            return "checkpoint:latest"
        if self.kind == "step":
            return f"checkpoint:step:{self.step}"
        return f"checkpoint:pool:last-{self.last}" + (":by-win-rate" if self.by_win_rate else "")


def parse_source(text: str) -> SnapshotSource:
    """The parsed source; ValueError naming the accepted forms for anything else."""
    found = _PATTERN.fullmatch(text.strip())
    if found is None or (found.group(2) is not None and int(found.group(2)) < 1) or \
            (found.group(3) is not None and int(found.group(3)) < 1):
        raise ValueError(f"source {text!r} is not a checkpoint source; use {FORMS}, e.g. source: checkpoint:pool:last-3")
    if found.group(1):
        return SnapshotSource("latest")
    if found.group(2) is not None:
        return SnapshotSource("step", step=int(found.group(2)))
    return SnapshotSource("pool", last=int(found.group(3)), by_win_rate=bool(found.group(4)))
