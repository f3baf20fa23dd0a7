"""`vibe-rl run`, `play` and `status` with bad input (real CLI): one error naming the option or file, exit 2, no
traceback, nothing started; and `kill` (SIGTERM) of `vibe-rl play` stops its throwaway servers and client."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

VIBE_RL = str(Path(sys.executable).parent / "vibe-rl")


def cli(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([VIBE_RL, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=120)


def refused(res: subprocess.CompletedProcess, *words: str) -> None:
    assert res.returncode == 2 and "Traceback" not in res.stdout + res.stderr, res.stdout + res.stderr
    for word in words:
        assert word in res.stderr, res.stderr


@pytest.fixture
def project(tmp_path) -> Path:
    assert cli("init", "race", cwd=tmp_path).returncode == 0
    return tmp_path / "race"


@pytest.mark.parametrize("args,words", [
    (["--timeout", "-1"], ["--timeout"]),
    (["--ready-timeout", "0"], ["--ready-timeout"]),
    (["--max-fixes", "-1"], ["--max-fixes"]),
    (["--set", "train.lr"], ["--set 'train.lr'", "key.sub=value"]),
    (["--set", "train.learning_rate=1e-5"], ["--set", "train.learning_rate (did you mean train.lr?)"]),
    (["--set", "train.lr=fast"], ["--set 'train.lr=fast'", "valid number"]),
    (["--detach", "--set", "rollout.max_tokens=many"], ["--set 'rollout.max_tokens=many'"]),
])
def test_run_refuses_bad_options_before_starting(project, args, words):
    refused(cli("run", project, "--fix", "off", *args, cwd=project.parent), *words)
    assert not (project / "logs").exists() and not (project / "experiments").exists()


def test_run_and_play_name_what_is_wrong_with_the_project(project, tmp_path):
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "empty").mkdir()
    for command in ("run", "play"):
        refused(cli(command, "a_file", cwd=tmp_path), "a_file is a file")
        refused(cli(command, "missing", cwd=tmp_path), "missing does not exist")
        refused(cli(command, "empty", cwd=tmp_path), "has no task_spec.json")
    refused(cli("play", project, "--device", "tpu", cwd=tmp_path), "--device 'tpu'")
    refused(cli("play", project, "--timeout", "0", cwd=tmp_path), "--timeout")
    refused(cli("status", project, "--wait", "-1", cwd=tmp_path), "--wait")


@pytest.mark.slow
def test_sigterm_of_play_stops_its_servers(project):
    proc = subprocess.Popen([VIBE_RL, "play", str(project), "--device", "cpu", "--timeout", "400"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        lines = []
        for line in proc.stdout:  # the servers answer /healthz, the client is about to start
            lines.append(line)
            if "against throwaway servers" in line:
                break
        urls = re.findall(r"http://127\.0\.0\.1:(\d+)", "".join(lines))
        assert urls, "".join(lines)
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=120)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0 and "Traceback" not in out, out
    time.sleep(1.0)
    for port in urls:  # before the fix, SIGTERM ended `play` and left its server and client running
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", int(port))) != 0, f"a play server still listens on {port}"


def test_run_without_a_fix_llm_stops_before_starting_on_a_config_its_server_cannot_load(project):
    """A misspelt key in config.yaml: the server would die at once and nothing would repair it, so the run
    stops before any venv or tmux session, naming the key and its likely spelling."""
    config = project / "config.yaml"
    config.write_text(config.read_text().replace("  batch_size:", "  batch_szie:", 1))
    res = cli("run", project, "--fix", "off", cwd=project.parent)
    refused(res, "Not starting", "train.batch_szie (did you mean train.batch_size?)", "vibe-rl doctor")
    assert not (project / ".venv-server").exists() and not (project / "experiments").exists()
