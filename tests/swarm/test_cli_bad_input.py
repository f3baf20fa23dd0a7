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
