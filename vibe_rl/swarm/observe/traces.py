"""Read the recorded episodes and turns of an experiment (`<dir>/swarm.sqlite`), for the trace viewer
and `vibe-rl traces export`. Read-only: a running server keeps writing (WAL mode allows it)."""

from __future__ import annotations

import json
import math
import sqlite3
from array import array
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
                 limit: int = 500, group: str | None = None, min_reward: float | None = None,
                 max_reward: float | None = None) -> list[dict[str, Any]]:
        """Episodes, newest first, with their players and models; filters match exactly (player: tag or role;
        group: the update that trained them, `step:N`, or their status, e.g. `completed`; reward: a closed range)."""
        where, args = [], []
        if task:
            where.append("e.task_id = ?")
            args.append(task)
        if group:
            if group.startswith("step:") and group[5:].lstrip("-").isdigit():
                where.append("e.trained_step = ?")
                args.append(int(group[5:]))
            else:
                where.append("e.status = ?")
                args.append(group)
        for bound, op in ((min_reward, ">="), (max_reward, "<=")):
            if bound is not None and math.isfinite(bound):
                where.append(f"e.reward {op} ?")
                args.append(float(bound))
        if player:
            where.append("EXISTS (SELECT 1 FROM turns f WHERE f.episode_uuid = e.episode_uuid "
                         "AND (f.player = ? OR f.player LIKE ?))")
            args += [player, f"{player}:%"]
        if model:
            where.append("EXISTS (SELECT 1 FROM turns g WHERE g.episode_uuid = e.episode_uuid AND g.model = ?)")
            args.append(model)
        sql = ("SELECT e.episode_uuid, e.task_id, e.reward, e.status, e.trained_step, e.ended_at, e.metadata_json, "
               "(SELECT COUNT(*) FROM turns t WHERE t.episode_uuid = e.episode_uuid) AS turns, "
               "(SELECT GROUP_CONCAT(DISTINCT t.player) FROM turns t WHERE t.episode_uuid = e.episode_uuid) AS players, "
               "(SELECT GROUP_CONCAT(DISTINCT t.model) FROM turns t WHERE t.episode_uuid = e.episode_uuid) AS models "
               "FROM episodes e" + (" WHERE " + " AND ".join(where) if where else "")
               + " ORDER BY e.ended_at DESC LIMIT ?")
        with self._db() as db:
            rows = db.execute(sql, [*args, int(limit)]).fetchall()
        out = []
        for r in rows:
            found = {k: r[k] for k in r.keys() if k != "metadata_json"}
            found["seat_rewards"] = seat_rewards(_json_or_none(r["metadata_json"]))
            out.append({**found, "players": sorted(filter(None, (r["players"] or "").split(","))),
                        "models": sorted(filter(None, (r["models"] or "").split(",")))})
        return out

    def episode(self, episode_uuid: str) -> dict[str, Any] | None:
        """One episode with its task, metadata and every turn in order (messages, answer, model, version)."""
        with self._db() as db:
            ep = db.execute("SELECT * FROM episodes WHERE episode_uuid = ?", (episode_uuid,)).fetchone()
            if ep is None:
                return None
            # a database written before the column existed (read-only here, so it is not added)
            context = ("context_only" if any(c[1] == "context_only" for c in db.execute("PRAGMA table_info(turns)"))
                       else "0 AS context_only")
            turns = db.execute("SELECT idx, player, model, static, weight_version, messages_json, response_text, ts, "
                               f"prompt_ids, response_ids, logprobs, {context} FROM turns WHERE episode_uuid = ? "
                               "ORDER BY idx",
                               (episode_uuid,)).fetchall()
        metadata = json.loads(ep["metadata_json"] or "null")
        return {"episode_uuid": ep["episode_uuid"], "task_id": ep["task_id"], "reward": ep["reward"],
                "status": ep["status"], "trained_step": ep["trained_step"], "ended_at": ep["ended_at"],
                "task": json.loads(ep["task_json"] or "null"), "metadata": metadata,
                "seat_rewards": seat_rewards(metadata),
                "turns": [{"idx": t["idx"], "player": t["player"], "model": t["model"], "static": bool(t["static"]),
                           "context_only": bool(t["context_only"]),
                           "weight_version": t["weight_version"], "messages": json.loads(t["messages_json"] or "[]"),
                           "response": t["response_text"], "ts": t["ts"],
                           "prompt_tokens": len(t["prompt_ids"] or b"") // 4,
                           "response_ids": _blob(t["response_ids"], "i"), "logprobs": _blob(t["logprobs"], "d")}
                          for t in turns]}

    def model_path(self) -> str | None:
        """The trainable model's `model.path` of the run (the job the server recorded), for decoding its tokens."""
        try:
            with self._db() as db:
                row = db.execute("SELECT value FROM meta WHERE key = 'job'").fetchone()
        except sqlite3.Error:  # a database without the meta table
            return None
        job = _json_or_none(row[0]) if row else None
        path = ((job or {}).get("model") or {}).get("path") if isinstance(job, dict) else None
        return path if isinstance(path, str) and path else None

    def filters(self) -> dict[str, list[str]]:
        """The values the viewer's filters offer: tasks, groups (update steps, statuses), player roles and tags,
        models."""
        with self._db() as db:
            tasks = [r[0] for r in db.execute("SELECT DISTINCT task_id FROM episodes ORDER BY task_id LIMIT 1000")]
            steps = [f"step:{r[0]}" for r in db.execute("SELECT DISTINCT trained_step FROM episodes WHERE "
                                                        "trained_step IS NOT NULL ORDER BY trained_step LIMIT 1000")]
            statuses = [r[0] for r in db.execute("SELECT DISTINCT status FROM episodes ORDER BY status")]
            players = [r[0] for r in db.execute("SELECT DISTINCT player FROM turns WHERE player IS NOT NULL "
                                                "ORDER BY player LIMIT 1000")]
            models = [r[0] for r in db.execute("SELECT DISTINCT model FROM turns ORDER BY model")]
        roles = sorted({p.split(":", 1)[0] for p in players if ":" in p})
        return {"tasks": tasks, "groups": statuses + steps, "players": roles + players,
                "models": [m for m in models if m]}

    def export(self) -> Iterator[dict[str, Any]]:
        """Every episode with its turns, oldest first (the jsonl export)."""
        with self._db() as db:
            uuids = [r[0] for r in db.execute("SELECT episode_uuid FROM episodes ORDER BY ended_at")]
        for uuid in uuids:
            found = self.episode(uuid)
            if found is not None:
                yield found


def _blob(data: bytes | None, code: str) -> list:
    out = array(code)
    if data:
        out.frombytes(data[: len(data) - len(data) % out.itemsize])
    return out.tolist()


def _json_or_none(text: str | None) -> Any:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def seat_rewards(metadata: Any) -> dict[str, float]:
    """The episode output metadata's `seat_rewards` (player tag -> reward), the finite numbers only; {} if absent."""
    found = metadata.get("seat_rewards") if isinstance(metadata, dict) else None
    if not isinstance(found, dict):
        return {}
    return {str(k): float(v) for k, v in found.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}
