"""What a server starts from: a checkpoint to resume, episodes to retrain, or nothing (`--fresh`).

A swarm server resumes from `experiments/<server>/checkpoints/latest.json` and puts completed but
untrained episodes from `swarm.sqlite` back into its pool. Before `vibe-rl run` starts a server it
decides, and says, what that server will pick up:
- `--fresh`: the experiment folder is moved to `experiments/.previous/<server>-<time>/` (nothing is
  deleted) and training starts at step 0;
- otherwise the checkpoint is resumed (announced with its step; updates are counted from there), and
  untrained episodes are retrained only when they were recorded under the same project files: a
  fingerprint of the project's code, configs and data is kept in `experiments/<server>/project-files.json`;
  when it changed, those episodes get status `stale` (kept in the database, never trained).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

FINGERPRINT_FILE = "project-files.json"
SUFFIXES = {".py", ".json", ".jsonl", ".yaml", ".yml", ".csv", ".txt", ".toml"}
SKIP_DIRS = {"logs", "experiments", ".git", "__pycache__", "node_modules", ".pytest_cache"}


def project_fingerprint(root: Path) -> str:
    """A hash of the files that decide what an episode is: code, configs, data (not docs, logs, venvs)."""
    root = Path(root).resolve()
    files = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".venv")]
        files += [Path(folder) / n for n in names if Path(n).suffix in SUFFIXES]
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


@dataclass
class StartPoint:
    """What one server will start from, and the sentences that say so."""

    server: str
    step: int = 0  # the checkpoint's global step (0: from scratch)
    checkpoint: str | None = None
    retrained: int = 0  # untrained episodes that go back into the pool
    set_aside: int = 0  # untrained episodes marked stale
    notes: list[str] = field(default_factory=list)


def latest_step(exp_dir: Path) -> tuple[int, str | None]:
    marker = Path(exp_dir) / "checkpoints" / "latest.json"
    try:
        info = json.loads(marker.read_text())
        path = marker.parent / info["dir"]
        return (int(info["step"]), str(path)) if path.is_dir() else (0, None)
    except (OSError, ValueError, KeyError, TypeError):
        return 0, None


def prepare(root: Path, server: str, fingerprint: str, fresh: bool = False) -> StartPoint:
    """Decide (and record) what `server` starts from; see the module docstring."""
    root = Path(root).resolve()
    exp = root / "experiments" / server
    point = StartPoint(server)
    if fresh and exp.exists():
        dest = root / "experiments" / ".previous" / f"{server}-{time.strftime('%Y%m%d-%H%M%S')}"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(exp), str(dest))
        point.notes.append(f"{server}: --fresh: moved the previous experiment to {dest.relative_to(root)}; "
                           "training starts at step 0")
    point.step, point.checkpoint = latest_step(exp)
    if point.checkpoint:
        point.notes.append(f"{server}: resuming the checkpoint at global step {point.step} "
                           f"({Path(point.checkpoint).relative_to(root)}); this run's updates are counted from "
                           "there (`--fresh` starts over)")
    record = exp / FINGERPRINT_FILE
    db = exp / "swarm.sqlite"
    if db.is_file():
        point.retrained, point.set_aside = _untrained(db, point.step, record, fingerprint, point.notes, server)
    exp.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({"fingerprint": fingerprint, "ts": time.time()}))
    return point


def _untrained(db: Path, step: int, record: Path, fingerprint: str, notes: list[str], server: str) -> tuple[int, int]:
    from vibe_rl.swarm.server.store import Store

    try:
        before = json.loads(record.read_text()).get("fingerprint")
    except (OSError, ValueError):
        before = None
    store = Store(db)
    try:
        count = store.count_untrained(step)
        if not count:
            return 0, 0
        if before == fingerprint:
            notes.append(f"{server}: {count} episodes of an earlier run (same project files) were recorded but "
                         "not trained; they go back into the pool (`--fresh` starts over)")
            return count, 0
        moved = store.set_aside(step)
        why = "the project's files changed since they were recorded" if before else \
            "no record says which project files they were recorded under"
        notes.append(f"{server}: set aside {moved} untrained episodes of an earlier run because {why}; they stay "
                     f"in {db.name} with status 'stale' and are not trained")
        return 0, moved
    finally:
        store.close()
