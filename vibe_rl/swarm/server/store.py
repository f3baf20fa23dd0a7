"""SQLite persistence in the experiment dir (`<dir>/swarm.sqlite`).

Every completed episode is written with its turns (messages, token ids,
logprobs, player tag, weight version) and reward before `end_episode` returns,
so a SIGKILLed server loses no completed episode. Episodes carry a status:
`completed` (in the pool, not yet trained), `trained` (with the step),
`skipped` (a dummy group under the non_dummy_tasks policy), `failed` (the
update raised) or `stale` (set aside by `vibe-rl run`: recorded under older project files). WAL mode: a viewer may read while the server writes.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from array import array
from pathlib import Path
from typing import Any

from vibe_rl.rl.samples import Turn
from vibe_rl.swarm.server.pool import CompletedEpisode

SCHEMA = """
CREATE TABLE IF NOT EXISTS episodes (
    episode_uuid TEXT PRIMARY KEY, task_id TEXT NOT NULL, task_json TEXT, reward REAL NOT NULL,
    metadata_json TEXT, status TEXT NOT NULL, trained_step INTEGER, ended_at REAL);
CREATE INDEX IF NOT EXISTS episodes_status ON episodes(status);
CREATE TABLE IF NOT EXISTS turns (
    episode_uuid TEXT NOT NULL, idx INTEGER NOT NULL, player TEXT, model TEXT, static INTEGER,
    weight_version INTEGER, messages_json TEXT, response_text TEXT, prompt_ids BLOB, response_ids BLOB,
    logprobs BLOB, temperature REAL, top_p REAL, ts REAL, context_only INTEGER DEFAULT 0,
    PRIMARY KEY (episode_uuid, idx));
CREATE TABLE IF NOT EXISTS updates (step INTEGER PRIMARY KEY, metrics_json TEXT, ts REAL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
"""

TURN_INSERT = ("INSERT INTO turns (episode_uuid, idx, player, model, static, weight_version, messages_json, "
               "response_text, prompt_ids, response_ids, logprobs, temperature, top_p, ts, context_only) "
               "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)")


def _ids(blob: bytes | None, code: str) -> list:
    out = array(code)
    if blob:
        out.frombytes(blob)
    return out.tolist()


class Store:
    """Thread-safe (one lock) wrapper around one SQLite connection."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))  # prompts and answers: owner only
        for suffix in ("", "-wal", "-shm"):  # SQLite gives its -wal/-shm files the database's mode
            extra = self.path.with_name(self.path.name + suffix)
            if extra.exists():
                os.chmod(extra, 0o600)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # survives a killed process; fsync at checkpoints
        self._db.executescript(SCHEMA)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(turns)")}
        if "context_only" not in columns:  # a database written before the column existed
            self._db.execute("ALTER TABLE turns ADD COLUMN context_only INTEGER DEFAULT 0")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ------------------------------------------------------------ writes

    def save_episode(self, ep: CompletedEpisode, task: dict[str, Any], metadata: dict[str, Any],
                     status: str = "completed") -> None:
        """Write the episode and its turns in one transaction; status 'eval' keeps it out of every pool."""
        rows = [(ep.episode_uuid, i, t.player, t.model, int(t.static), t.weight_version,
                 json.dumps(t.messages, ensure_ascii=False), t.response_text,
                 array("i", t.prompt_ids).tobytes(), array("i", t.response_ids).tobytes(),
                 array("d", t.response_logprobs).tobytes(), t.temperature, t.top_p, t.ts, int(t.context_only))
                for i, t in enumerate(ep.turns)]
        with self._lock:
            self._db.execute("BEGIN")
            try:
                self._db.execute(
                    "INSERT INTO episodes VALUES (?,?,?,?,?,?,?,?)",
                    (ep.episode_uuid, ep.task_id, json.dumps(task, ensure_ascii=False, default=str), ep.reward,
                     json.dumps(metadata, ensure_ascii=False, default=str), status, None, ep.ended_at))
                self._db.executemany(TURN_INSERT, rows)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def mark(self, episode_uuids: list[str], status: str, step: int | None = None) -> None:
        with self._lock:
            self._db.executemany("UPDATE episodes SET status=?, trained_step=? WHERE episode_uuid=?",
                                 [(status, step, u) for u in episode_uuids])

    def record_update(self, step: int, metrics: dict[str, Any]) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO updates VALUES (?,?,?)",
                             (step, json.dumps(metrics, default=str), time.time()))

    def set_meta(self, key: str, value: Any) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO meta VALUES (?,?)", (key, json.dumps(value)))

    # ------------------------------------------------------------ reads

    def get_meta(self, key: str, default: Any = None) -> Any:
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return json.loads(row[0]) if row else default

    def episode_status(self, episode_uuid: str) -> tuple[str, float, str] | None:
        """(status, reward, the task's task_id) of a stored episode, or None (the task_id column holds the
        group key, which a begin may have named apart from the task)."""
        with self._lock:
            row = self._db.execute("SELECT status, reward, task_id, task_json FROM episodes WHERE episode_uuid=?",
                                   (episode_uuid,)).fetchone()
        if row is None:
            return None
        status, reward, group, task_json = row
        task = json.loads(task_json) if task_json else None
        return status, reward, str(task["task_id"]) if isinstance(task, dict) and "task_id" in task else group

    def counts(self) -> dict[str, int]:
        with self._lock:
            rows = self._db.execute("SELECT status, COUNT(*) FROM episodes GROUP BY status").fetchall()
        return dict(rows)

    def updates(self, limit: int = 100) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._db.execute("SELECT step, metrics_json, ts FROM updates ORDER BY step DESC LIMIT ?",
                                    (limit,)).fetchall()
        return [{"step": s, "ts": ts, **json.loads(m)} for s, m, ts in reversed(rows)]

    def updates_since(self, since: int = 0, limit: int = 1000) -> list[dict[str, Any]]:
        """Updates with step > since, oldest first; `step` is the int global step."""
        with self._lock:
            rows = self._db.execute("SELECT step, metrics_json, ts FROM updates WHERE step > ? ORDER BY step LIMIT ?",
                                    (int(since), int(limit))).fetchall()
        return [{**json.loads(m), "step": int(s), "ts": ts} for s, m, ts in rows]

    _UNTRAINED = "status='completed' OR (status='trained' AND trained_step > ?)"

    def count_untrained(self, resumed_step: int) -> int:
        """How many episodes `untrained(resumed_step)` would put back in the pool."""
        with self._lock:
            return self._db.execute(f"SELECT COUNT(*) FROM episodes WHERE {self._UNTRAINED}",
                                    (resumed_step,)).fetchone()[0]

    def set_aside(self, resumed_step: int, status: str = "stale") -> int:
        """Give the episodes a restart would retrain another status (kept, never trained); returns how many.
        `vibe-rl run` does this when they were recorded under project files that have changed since."""
        with self._lock:
            return self._db.execute(f"UPDATE episodes SET status=? WHERE {self._UNTRAINED}",
                                    (status, resumed_step)).rowcount

    def episode_metadata(self, episode_uuids: list[str]) -> dict[str, dict[str, Any]]:
        """The output metadata each episode ended with (per-seat credit reads its 'seat_rewards')."""
        out: dict[str, dict[str, Any]] = {}
        with self._lock:
            for i in range(0, len(episode_uuids), 500):  # below SQLite's bound-parameter limit
                chunk = episode_uuids[i:i + 500]
                rows = self._db.execute(f"SELECT episode_uuid, metadata_json FROM episodes WHERE episode_uuid IN "
                                        f"({','.join('?' * len(chunk))})", chunk).fetchall()
                out.update({uuid: json.loads(m or "null") or {} for uuid, m in rows})
        return out

    def untrained(self, resumed_step: int) -> list[CompletedEpisode]:
        """Episodes to put back in the pool after a restart: never trained, or trained in a
        step newer than the checkpoint we resumed from (those weights were lost)."""
        with self._lock:
            eps = self._db.execute(
                "SELECT episode_uuid, task_id, reward, ended_at FROM episodes WHERE status='completed' "
                "OR (status='trained' AND trained_step > ?) ORDER BY ended_at", (resumed_step,)).fetchall()
            out = []
            for uuid, task_id, reward, ended_at in eps:
                turns = [Turn(prompt_ids=_ids(p, "i"), response_ids=_ids(r, "i"), response_logprobs=_ids(lp, "d"),
                                    messages=json.loads(m), response_text=text or "", player=player,
                                    model=model or "", static=bool(static), weight_version=wv or 0,
                                    temperature=1.0 if temp is None else temp, top_p=1.0 if top_p is None else top_p,
                                    ts=ts or 0.0, context_only=bool(context))
                         for player, model, static, wv, m, text, p, r, lp, temp, top_p, ts, context in self._db.execute(
                             "SELECT player, model, static, weight_version, messages_json, response_text, prompt_ids, "
                             "response_ids, logprobs, temperature, top_p, ts, context_only FROM turns WHERE episode_uuid=? "
                             "ORDER BY idx",
                             (uuid,))]
                out.append(CompletedEpisode(uuid, task_id, reward, turns, ended_at or 0.0))
        return out

    def recent_answers(self, limit: int) -> list[str]:
        """The trainable model's latest answers (response text), newest first."""
        with self._lock:
            return [r[0] or "" for r in self._db.execute(
                "SELECT response_text FROM turns WHERE static=0 ORDER BY ts DESC LIMIT ?", (limit,)).fetchall()]

    def recent_calls(self, limit: int) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._db.execute("SELECT episode_uuid, player, model, static, ts FROM turns "
                                    "ORDER BY ts DESC LIMIT ?", (limit,)).fetchall()
        return [{"episode_uuid": u, "player": p, "model": m, "static": bool(s), "ts": ts}
                for u, p, m, s, ts in reversed(rows)]
