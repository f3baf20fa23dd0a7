"""`vibe-rl swarm ...` with bad input (real CLI): one error naming the option or variable, exit 2, no
traceback, and nothing started or written (no token file for a port the server never got)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

VIBE_RL = str(Path(sys.executable).parent / "vibe-rl")


def swarm(*args, env=None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([VIBE_RL, "swarm", *map(str, args)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "VIBE_RL_CACHE_DIR": str(cwd), **(env or {})}, cwd=cwd)


def refused(res: subprocess.CompletedProcess, *words: str) -> None:
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stdout + res.stderr
    for word in words:
        assert word in res.stderr, res.stderr


@pytest.mark.parametrize("args,words", [
    (["--port", "99999"], ["--port", "65535"]),
    (["--port", "-1"], ["--port"]),
    (["--incomplete-group-ttl", "0"], ["--incomplete-group-ttl", "greater than 0"]),
    (["--config", "."], ["--config . is a folder"]),
    (["--token-file", "."], ["--token-file . is a folder"]),
    (["--host", "no-such-host.invalid"], ["--host", "127.0.0.1"]),
])
def test_start_refuses_bad_options_before_serving(tmp_path, args, words):
    refused(swarm("start", "--experiment-dir", tmp_path / "exp", *args, cwd=tmp_path), *words)
    assert not (tmp_path / "exp").exists() and not (tmp_path / "swarm-tokens").exists()


def test_start_on_a_port_in_use_names_it(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        res = swarm("start", "--port", port, "--model", "tiny", "--experiment-dir", tmp_path / "exp", cwd=tmp_path)
    refused(res, f"--port {port}", "in use", "ss -ltnp")
    assert not (tmp_path / "swarm-tokens").exists()  # no token registered for a port the server never got


def test_overwatch_interval_and_junk_token_variables(tmp_path):
    refused(swarm("overwatch", "--interval", "-1", cwd=tmp_path), "--interval")
    url = ["--url", "http://127.0.0.1:9"]
    refused(swarm("stop", *url, env={"VIBE_RL_SWARM_TOKEN": "   "}, cwd=tmp_path), "VIBE_RL_SWARM_TOKEN", "unset")
    for value, word in ((tmp_path / "missing", "is missing"), (tmp_path, "is a folder"),
                        (tmp_path / "empty", "is empty")):
        (tmp_path / "empty").write_text("\n")
        refused(swarm("status", *url, env={"VIBE_RL_SWARM_TOKEN_FILE": str(value)}, cwd=tmp_path),
                "VIBE_RL_SWARM_TOKEN_FILE", word)


def traces(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([VIBE_RL, "traces", *map(str, args)], capture_output=True, text=True, timeout=120, cwd=cwd)


def test_traces_on_a_damaged_or_foreign_database(tmp_path):
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "swarm.sqlite").write_text("not a database")
    refused(traces("serve", "junk", "--port", 0, cwd=tmp_path), "swarm.sqlite is not a swarm server's episode database")
    refused(traces("export", "junk", cwd=tmp_path), "not a swarm server's episode database")
    import sqlite3

    (tmp_path / "other").mkdir()
    sqlite3.connect(tmp_path / "other" / "swarm.sqlite").execute("CREATE TABLE t (x)").connection.close()
    refused(traces("export", "other", cwd=tmp_path), "no such table")
    refused(traces("serve", tmp_path / "nothing", cwd=tmp_path), "No swarm.sqlite")


def test_traces_export_out_and_serve_port(tmp_path):
    import sqlite3

    (tmp_path / "exp").mkdir()
    with sqlite3.connect(tmp_path / "exp" / "swarm.sqlite") as db:  # the columns the checks read, no episodes
        db.execute("CREATE TABLE episodes (episode_uuid, task_id, reward, ended_at)")
        db.execute("CREATE TABLE turns (episode_uuid)")
    refused(traces("export", "exp", "--out", tmp_path / "missing" / "e.jsonl", cwd=tmp_path), "--out", "does not exist")
    refused(traces("export", "exp", "--out", tmp_path, cwd=tmp_path), "--out", "is a folder")
    refused(traces("serve", "exp", "--port", 70000, cwd=tmp_path), "--port")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        refused(traces("serve", "exp", "--port", holder.getsockname()[1], cwd=tmp_path), "in use")
    done = traces("export", "exp", "--out", "e.jsonl", cwd=tmp_path)
    assert done.returncode == 0 and (tmp_path / "e.jsonl").read_text() == "", done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.jsonl", "exp"]  # no partial file left
