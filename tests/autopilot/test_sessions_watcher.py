"""Real tmux sessions running trivial commands, and the watcher's failure detection on them."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from vibe_rl.autopilot.sessions import SessionSpec, TmuxSessions
from vibe_rl.autopilot.watcher import ServerView, Watcher

from .conftest import free_port


@pytest.fixture
def tmux(tmux_socket):
    return TmuxSessions(tmux_socket)


def _wait_for(pred, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.1)
    return False


def test_session_logs_output_env_and_exit_status(tmux, tmp_path):
    cmd = f"{sys.executable} -c \"import os, sys; print('hi', os.environ['FOO']); sys.exit(3)\""
    spec = SessionSpec("apt-swarm-client", cmd, tmp_path, tmp_path / "logs", {"FOO": "bar"})
    tmux.start(spec)
    assert _wait_for(lambda: "__VIBE_RL_EXIT__" in tmux.read_log(spec))
    text = tmux.read_log(spec)
    assert "hi bar" in text and "__VIBE_RL_EXIT__ 3" in text
    assert spec.log == tmp_path / "logs" / "apt-swarm-client.log"
    # a restart appends to the log, and reading starts at the latest start
    spec.command = "echo second"
    tmux.start(spec)
    assert _wait_for(lambda: "__VIBE_RL_EXIT__ 0" in tmux.read_log(spec))
    assert "hi bar" not in tmux.read_log(spec) and "hi bar" in tmux.read_log(spec, since_start=False)
    assert tmux.stop(spec.name) and not tmux.exists(spec.name)


def test_stop_ends_only_the_named_session(tmux, tmux_socket, tmp_path):
    subprocess.run(["tmux", "-L", tmux_socket, "new-session", "-d", "-s", "someone-elses", "sleep 60"], check=True)
    subprocess.run(["tmux", "-L", tmux_socket, "new-session", "-d", "-s", "apt-swarm-server-2", "sleep 60"], check=True)
    mine = SessionSpec("apt-swarm-server", "sleep 60", tmp_path, tmp_path / "logs")
    tmux.start(mine)
    assert tmux.stop("apt-swarm-server")
    assert not tmux.exists("apt-swarm-server")
    assert tmux.exists("someone-elses") and tmux.exists("apt-swarm-server-2")  # no prefix matching
    for name in ("someone-elses", "apt-swarm-server-2"):
        tmux.stop(name)


def _watcher(tmux, tmp_path, server_cmd, client_cmd="sleep 60"):
    port = free_port()
    server = SessionSpec("apw-swarm-server", server_cmd, tmp_path, tmp_path / "logs")
    client = SessionSpec("apw-swarm-client", client_cmd, tmp_path, tmp_path / "logs")
    view = ServerView("server1", f"http://127.0.0.1:{port}", server)
    return Watcher(tmux, [view], client, tmp_path, {}), server, client


def test_server_never_ready(tmux, tmp_path):
    w, server, client = _watcher(tmux, tmp_path, "echo booting; sleep 60")
    tmux.start(server)
    d = w.wait_ready(timeout=2.0, poll=0.2)
    assert d.kind == "server_not_ready" and "healthz" in d.summary and "booting" in d.excerpt
    tmux.stop(server.name)


def test_port_in_use_is_recognised_while_waiting(tmux, tmp_path):
    msg = "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 1): address already in use"
    w, server, client = _watcher(tmux, tmp_path, f"echo \"{msg}\"; exit 1")
    tmux.start(server)
    d = w.wait_ready(timeout=20.0, poll=0.2)
    assert d.kind == "port_in_use" and d.source == "apw-swarm-server"
    tmux.stop(server.name)


def test_client_that_died_without_traceback(tmux, tmp_path):
    w, server, client = _watcher(tmux, tmp_path, "sleep 60", client_cmd="echo bye; exit 7")
    tmux.start(client)
    assert _wait_for(lambda: "__VIBE_RL_EXIT__" in tmux.read_log(client))
    d = w.log_failure(client, "client")
    assert d.kind == "client_died" and "status 7" in d.summary and "bye" in d.excerpt
    tmux.stop(client.name)


def test_cli_stop_ends_the_projects_sessions_and_nothing_else(base_project, base_env, tmux_socket):
    from vibe_rl.autopilot import identity

    from .conftest import run_cli

    own = f"spy-{identity.key(base_project)}"  # the project's sessions carry a hash of its folder
    names = [f"{own}-swarm-server", f"{own}-swarm-server-2", f"{own}-swarm-client", f"{own}-swarm-server-3x",
             "spy-swarm-server", "other"]
    for name in names:
        subprocess.run(["tmux", "-L", tmux_socket, "new-session", "-d", "-s", name, "sleep 60"], check=True)
    res = run_cli(["run", str(base_project), "--stop"], base_env, timeout=60)
    assert res.returncode == 0, res.stderr
    alive = [n for n in names if subprocess.run(["tmux", "-L", tmux_socket, "has-session", "-t", f"={n}"],
                                                capture_output=True).returncode == 0]
    assert alive == [f"{own}-swarm-server-3x", "spy-swarm-server", "other"]  # another project's names stay
    assert f"{own}-swarm-server, {own}-swarm-server-2, {own}-swarm-client" in res.stdout
    for n in alive:
        subprocess.run(["tmux", "-L", tmux_socket, "kill-session", "-t", f"={n}"])
