"""vibe_rl.swarm.launch against real processes and a real HTTP server on loopback (a thread running
http.server that answers /healthz with a chosen status)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from vibe_rl.errors import SwarmError, VibeRLError
from vibe_rl.swarm.launch import ServerNotReadyError, free_port, spawn, stop, wait_healthy


@contextmanager
def health_server(status: int) -> Iterator[tuple[str, list[str]]]:
    """A loopback HTTP server whose /healthz answers `status` -> (its URL, the paths it was asked for)."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            body = b'{"ok": true}'
            self.send_response(status if self.path == "/healthz" else 404)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:  # keep the test output clean
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_free_port_can_be_bound_on_loopback():
    port = free_port()
    assert 1024 <= port <= 65535
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_wait_healthy_returns_once_healthz_answers_200():
    with health_server(200) as (url, seen):
        wait_healthy(url, timeout=30.0)
        assert seen == ["/healthz"]
        wait_healthy(url, timeout=0)  # asked once even when no time is left
        assert seen == ["/healthz", "/healthz"]


def test_wait_healthy_stops_at_once_when_the_process_exited_and_shows_its_log(tmp_path):
    log = tmp_path / "server.log"
    proc = spawn(python("print('error: address already in use'); raise SystemExit(3)"), log)
    assert proc.wait(timeout=60) == 3
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(ServerNotReadyError) as info:
        wait_healthy(url, proc, timeout=600.0, log_path=log)  # the deadline is never what ends it
    err = info.value
    assert isinstance(err, SwarmError) and isinstance(err, VibeRLError) and isinstance(err, RuntimeError)
    assert err.url == url and err.returncode == 3
    assert "error: address already in use" in err.log_tail  # spawn wrote the child's output to the log
    assert "exited (status 3) before answering /healthz" in str(err)
    assert "error: address already in use" in str(err) and str(log) in str(err)
    assert "start it again" in str(err)  # says what to do


def test_wait_healthy_watches_every_process_of_a_group(tmp_path):
    alive = spawn(python("import time; time.sleep(600)"), tmp_path / "alive.log")
    dead = spawn(python("raise SystemExit(7)"), tmp_path / "dead.log")
    try:
        dead.wait(timeout=60)
        with pytest.raises(ServerNotReadyError) as info:
            wait_healthy(f"http://127.0.0.1:{free_port()}", [alive, dead], timeout=600.0)
        assert info.value.returncode == 7 and info.value.log_tail == ""
    finally:
        stop(alive)
    assert alive.returncode == -signal.SIGTERM


def test_wait_healthy_times_out_with_a_clear_message_when_healthz_is_not_200(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("x" * 5000 + "loading the model weights")
    with health_server(503) as (url, seen):
        with pytest.raises(ServerNotReadyError) as info:
            wait_healthy(url, timeout=0.3, log_path=log, interval=0.05, tail_chars=100)
    err = info.value
    assert seen and set(seen) == {"/healthz"}  # it kept asking; a 503 is not healthy
    assert err.returncode is None
    assert err.log_tail == ("x" * 5000 + "loading the model weights")[-100:]
    assert f"{url} did not answer /healthz within 0.3 s" in str(err)
    assert "allow a longer timeout" in str(err) and "loading the model weights" in str(err)


def test_stop_terminates_then_kills_what_ignores_sigterm():
    stubborn = subprocess.Popen(python("import signal, sys, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                                       "print('ready', flush=True)\ntime.sleep(600)"),
                                stdout=subprocess.PIPE, text=True)
    assert stubborn.stdout.readline() == "ready\n"  # SIGTERM is ignored from here on
    stop(stubborn, grace=0.5)
    stubborn.stdout.close()
    assert stubborn.returncode == -signal.SIGKILL


def test_stop_signals_the_process_group_and_leaves_exited_processes_alone(tmp_path):
    proc = spawn(python("import time; time.sleep(600)"), tmp_path / "p.log", new_session=True)
    stop(proc, group=True)
    assert proc.returncode == -signal.SIGTERM
    stop(proc)  # already stopped: nothing to do
    stop(None)
    assert proc.returncode == -signal.SIGTERM
