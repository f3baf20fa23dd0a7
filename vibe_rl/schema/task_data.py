"""Tasks from data files: JSON Lines, JSON lists, and Hugging Face datasets saved on local disk (no hub).

    tasks = load_tasks("data/train.jsonl", TaskColumns(task_id="id", main_query="question"))
    tasks = load_tasks("data/gsm8k_saved", TaskColumns(task_id=None, main_query="question"), split="train")

Every row becomes one `Task`: `task_id` from the column `columns.task_id` (as a string; None numbers the
rows 0, 1, ...), `main_query` from `columns.main_query`, and `metadata` from the columns listed in
`columns.metadata` (None: every column of the row, so game code finds all of it in `task.metadata`).
Nothing is dropped silently: a bad line, a missing column or a repeated task_id is an error that names
the file, the row and the fix.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from vibe_rl.errors import ConfigError
from vibe_rl.schema.task import Task


class TaskColumns(BaseModel):
    """Which columns of a data file fill which Task fields."""

    model_config = ConfigDict(extra="forbid")

    task_id: str | None = Field(default="task_id", description="Column with each row's unique id (the GRPO group "
                                                               "key); None numbers the rows 0, 1, 2, ...")
    main_query: str | None = Field(default="main_query", description="Column with the prompt or a summary; None "
                                                                     "(or the default name, when absent): empty")
    metadata: list[str] | None = Field(default=None, description="Columns copied into Task.metadata; None: all")


def tasks_from_records(records: Iterable[Mapping[str, Any]], columns: TaskColumns | None = None,
                       source: str = "the data") -> list[Task]:
    """Rows (dicts) -> Tasks, by `columns`; see the module doc."""
    columns = columns or TaskColumns()
    tasks: list[Task] = []
    seen: dict[str, int] = {}
    for i, row in enumerate(records):
        if not isinstance(row, Mapping):
            raise ConfigError(f"Row {i} of {source} is a {type(row).__name__}, not an object with columns.")
        wanted = [c for c in (columns.task_id, *(columns.metadata or [])) if c is not None]
        if columns.main_query is not None and "main_query" in columns.model_fields_set:
            wanted.append(columns.main_query)
        missing = [c for c in wanted if c not in row]
        if missing:
            raise ConfigError(f"Row {i} of {source} has no column {missing[0]!r}; its columns are {sorted(row)}. "
                              "Map yours with TaskColumns(task_id=..., main_query=..., metadata=[...]) (task_id=None "
                              "numbers the rows).")
        task_id = str(i) if columns.task_id is None else str(row[columns.task_id])
        if task_id in seen:
            raise ConfigError(f"task_id {task_id!r} appears in rows {seen[task_id]} and {i} of {source}. Episodes "
                              "with one task_id form one GRPO group, so ids must be unique: pick a unique column, "
                              "or TaskColumns(task_id=None) to number the rows.")
        seen[task_id] = i
        query = row.get(columns.main_query, "") if columns.main_query is not None else ""
        meta = dict(row) if columns.metadata is None else {c: row[c] for c in columns.metadata}
        tasks.append(Task(task_id=task_id, main_query="" if query is None else str(query), metadata=meta))
    return tasks


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}:{n} is not valid JSON ({exc.msg}); each line of a .jsonl file holds one "
                              "JSON object.") from None
    return rows


def _read_json(path: Path) -> list[Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}).") from None
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        data = data["data"]
    if not isinstance(data, list):
        raise ConfigError(f"{path} holds a JSON {type(data).__name__}; expected a list of rows (or {{'data': [...]}}).")
    return data


def _read_saved_dataset(path: Path, split: str | None) -> list[dict[str, Any]]:
    from vibe_rl.extras import require

    datasets = require("datasets", "loading a Hugging Face dataset saved with save_to_disk")
    data = datasets.load_from_disk(str(path))
    if isinstance(data, datasets.DatasetDict):
        if split is None:
            if len(data) != 1:
                raise ConfigError(f"{path} is a DatasetDict with splits {sorted(data)}; pass split=... to pick one.")
            split = next(iter(data))
        if split not in data:
            raise ConfigError(f"{path} has no split {split!r}; its splits are {sorted(data)}.")
        data = data[split]
    elif split is not None:
        raise ConfigError(f"{path} is a single Dataset without splits; drop split={split!r}.")
    return data.to_list()


def load_tasks(path: str | Path, columns: TaskColumns | None = None, split: str | None = None,
               limit: int | None = None) -> list[Task]:
    """Tasks from `path`: a .jsonl file, a .json list, or a folder written by `datasets` `save_to_disk`.
    `limit` keeps the first rows only (None: all)."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"No data at {path}. Pass a .jsonl / .json file or a folder from Dataset.save_to_disk.")
    if path.is_dir():
        rows = _read_saved_dataset(path, split)
    elif path.suffix == ".jsonl":
        rows = _read_jsonl(path)
    elif path.suffix == ".json":
        rows = _read_json(path)
    else:
        raise ConfigError(f"{path}: unknown data format {path.suffix!r}; use .jsonl, .json, or a saved dataset folder.")
    if split is not None and not path.is_dir():
        raise ConfigError(f"split={split!r} applies to saved Hugging Face datasets only, not to {path.name}.")
    return tasks_from_records(rows[:limit] if limit is not None else rows, columns, str(path))
