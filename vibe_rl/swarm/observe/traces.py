"""Read the recorded episodes and turns of an experiment (`<dir>/swarm.sqlite`), for the trace viewer
and `vibe-rl traces export`. Read-only: a running server keeps writing (WAL mode allows it)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vibe_rl.errors import ConfigError

DB_NAME = "swarm.sqlite"


class TraceReader:
    """Episodes and turns of one experiment directory."""

    def __init__(self, exp_dir: str | Path):
        self.path = Path(exp_dir) / DB_NAME
        if not self.path.is_file():
            raise ConfigError(f"No {DB_NAME} in {exp_dir}: pass an experiment dir of a run "
                              "(e.g. PROJECT/experiments/server1, the server's --experiment-dir).")

    def _db(self) -> sqlite3.Connection:
        db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=10)
        db.row_factory = sqlite3.Row
        return db

    def episodes(self, task: str | None = None, player: str | None = None, model: str | None = None,
                 limit: int = 500) -> list[dict[str, Any]]:
        """Episodes, newest first, with their players and models; filters match exactly (player: tag or role)."""
        where, args = [], []
        if task:
            where.append("e.task_id = ?")
            args.append(task)
        if player:
            where.append("EXISTS (SELECT 1 FROM turns f WHERE f.episode_uuid = e.episode_uuid "
                         "AND (f.player = ? OR f.player LIKE ?))")
            args += [player, f"{player}:%"]
        if model:
            where.append("EXISTS (SELECT 1 FROM turns g WHERE g.episode_uuid = e.episode_uuid AND g.model = ?)")
            args.append(model)
        sql = ("SELECT e.episode_uuid, e.task_id, e.reward, e.status, e.trained_step, e.ended_at, "
               "(SELECT COUNT(*) FROM turns t WHERE t.episode_uuid = e.episode_uuid) AS turns, "
               "(SELECT GROUP_CONCAT(DISTINCT t.player) FROM turns t WHERE t.episode_uuid = e.episode_uuid) AS players, "
               "(SELECT GROUP_CONCAT(DISTINCT t.model) FROM turns t WHERE t.episode_uuid = e.episode_uuid) AS models "
               "FROM episodes e" + (" WHERE " + " AND ".join(where) if where else "")
               + " ORDER BY e.ended_at DESC LIMIT ?")
        with self._db() as db:
            rows = db.execute(sql, [*args, int(limit)]).fetchall()
        return [{**dict(r), "players": sorted(filter(None, (r["players"] or "").split(","))),
                 "models": sorted(filter(None, (r["models"] or "").split(",")))} for r in rows]

    def episode(self, episode_uuid: str) -> dict[str, Any] | None:
        """One episode with its task, metadata and every turn in order (messages, answer, model, version)."""
        with self._db() as db:
            ep = db.execute("SELECT * FROM episodes WHERE episode_uuid = ?", (episode_uuid,)).fetchone()
            if ep is None:
                return None
            turns = db.execute("SELECT idx, player, model, static, weight_version, messages_json, response_text, ts "
                               "FROM turns WHERE episode_uuid = ? ORDER BY idx", (episode_uuid,)).fetchall()
        return {"episode_uuid": ep["episode_uuid"], "task_id": ep["task_id"], "reward": ep["reward"],
                "status": ep["status"], "trained_step": ep["trained_step"], "ended_at": ep["ended_at"],
                "task": json.loads(ep["task_json"] or "null"), "metadata": json.loads(ep["metadata_json"] or "null"),
                "turns": [{"idx": t["idx"], "player": t["player"], "model": t["model"], "static": bool(t["static"]),
                           "weight_version": t["weight_version"], "messages": json.loads(t["messages_json"] or "[]"),
                           "response": t["response_text"], "ts": t["ts"]} for t in turns]}

    def filters(self) -> dict[str, list[str]]:
        """The values the viewer's filters offer: tasks, player roles and tags, models."""
        with self._db() as db:
            tasks = [r[0] for r in db.execute("SELECT DISTINCT task_id FROM episodes ORDER BY task_id LIMIT 1000")]
            players = [r[0] for r in db.execute("SELECT DISTINCT player FROM turns WHERE player IS NOT NULL "
                                                "ORDER BY player LIMIT 1000")]
            models = [r[0] for r in db.execute("SELECT DISTINCT model FROM turns ORDER BY model")]
        roles = sorted({p.split(":", 1)[0] for p in players if ":" in p})
        return {"tasks": tasks, "players": roles + players, "models": [m for m in models if m]}

    def export(self) -> Iterator[dict[str, Any]]:
        """Every episode with its turns, oldest first (the jsonl export)."""
        with self._db() as db:
            uuids = [r[0] for r in db.execute("SELECT episode_uuid FROM episodes ORDER BY ended_at")]
        for uuid in uuids:
            found = self.episode(uuid)
            if found is not None:
                yield found
