#!/usr/bin/env python3
"""Check the task ids of a vibe-rl dataset before training.

Usage: python check_tasks.py DATASET.json [--key seed] [--batch-size 16]

DATASET.json is a JSON list of objects (e.g. mock_game_dataset.json). Each row's id (the
`task_id`, else `--key`, default `seed`) must be present, non-empty and unique: episodes that
share a task_id form one GRPO group, so an empty or repeated id merges unrelated games and
no weight update comes. Exit code 0 when the ids are fine, 1 otherwise. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter


def task_ids(rows: list, key: str) -> list[str | None]:
    """The id of each row: `task_id` when present, else `key`; None when neither is there."""
    out = []
    for row in rows:
        value = row.get("task_id", row.get(key)) if isinstance(row, dict) else None
        out.append(None if value is None else str(value))
    return out


def problems(ids: list[str | None], batch_size: int) -> list[str]:
    found = []
    missing = [i for i, v in enumerate(ids) if v is None]
    empty = [i for i, v in enumerate(ids) if v is not None and not v.strip()]
    if missing:
        found.append(f"{len(missing)} rows have no id (first rows: {missing[:5]})")
    if empty:
        found.append(f"{len(empty)} rows have an empty id (first rows: {empty[:5]})")
    repeated = {v: n for v, n in Counter(v for v in ids if v and v.strip()).items() if n > 1}
    if repeated:
        top = sorted(repeated.items(), key=lambda kv: -kv[1])[:5]
        found.append(f"{len(repeated)} ids are repeated, e.g. " + ", ".join(f"{v!r} x{n}" for v, n in top))
    distinct = len({v for v in ids if v and v.strip()})
    if distinct < batch_size:
        found.append(f"only {distinct} distinct tasks, fewer than one batch ({batch_size})")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", help="JSON file holding a list of task objects")
    parser.add_argument("--key", default="seed", help="field used when a row has no task_id (default: seed)")
    parser.add_argument("--batch-size", type=int, default=1, help="tasks per weight update (default: 1)")
    args = parser.parse_args(argv)
    with open(args.dataset, encoding="utf-8") as fh:
        rows = json.load(fh)
    if not isinstance(rows, list):
        print(f"{args.dataset}: expected a JSON list of tasks, got {type(rows).__name__}")
        return 1
    ids = task_ids(rows, args.key)
    found = problems(ids, args.batch_size)
    for line in found:
        print(f"{args.dataset}: {line}")
    if found:
        print("fix: give every task its own non-empty id, e.g. Task(task_id=str(row['seed']), ...)")
        return 1
    print(f"{args.dataset}: {len(ids)} tasks, ids unique and non-empty")
    return 0


if __name__ == "__main__":
    sys.exit(main())
