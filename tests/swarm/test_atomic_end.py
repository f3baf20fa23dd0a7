"""One game, two trainable models: `eps.end` of episodes on two servers records the game on both or on neither,
also when the client is SIGKILLed between the two phases (the two-phase end: vibe_rl/swarm/server/txn.py).

Two real servers on loopback with the tiny model, `--prepared-timeout 5` so that a prepared episode asks its
peers soon, yet never while a live client is still between two prepares (on a loaded machine those two calls
can be a second apart; a peer asked first would abort the game); the killed clients are real subprocesses (tests/helpers/atomic_client.py). Every wait is a poll
of a state (the status, the SQLite store) under a generous guard deadline.
"""

from __future__ import annotations

import json
import queue
import secrets
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.swarm.conftest import FAST, ROOT, Server
from vibe_rl.swarm import SwarmClient, Task, TrainJob, WorkflowOutput, open_episodes
from vibe_rl.swarm.client.sync_client import SwarmHTTPError
from vibe_rl.swarm.launch import free_port

GUARD = 180.0  # seconds: a guard against hanging, never an assertion about speed
PREPARED_TIMEOUT = 5  # seconds a prepared episode waits for its commit before it asks its peers
CLIENT = ROOT / "tests" / "helpers" / "atomic_client.py"


@pytest.fixture(scope="module")
def pair(tmp_path_factory, tiny_model_dir):
    """server1 and server2, ROLLING, shared by this module's tests (they assert per episode and by deltas)."""
    root = tmp_path_factory.mktemp("atomic")
    servers: list[Server] = []
    try:
        for name in ("server1", "server2"):
            servers.append(Server(root / name, FAST, extra=["--prepared-timeout", str(PREPARED_TIMEOUT)]).start())
            with SwarmClient(servers[-1].url) as client:
                client.auto_sync_train_config_and_start_engine(TrainJob(), verbose=False)
        yield servers
    finally:
        for server in servers:
            server.stop()


def until(what: str, check: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + GUARD
    while not (value := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within the {GUARD:g} s guard: {what}")
        time.sleep(0.1)
    return value


def stored(server: Server, uuid: str) -> list[tuple]:
    db = sqlite3.connect(f"file:{server.exp_dir}/swarm.sqlite?mode=ro", uri=True)
    try:
        return db.execute("SELECT task_id, reward, status FROM episodes WHERE episode_uuid=?", (uuid,)).fetchall()
    finally:
        db.close()


def group_size(client: SwarmClient, task_id: str) -> int:
    return sum(row["episodes"] for row in client.status().tasks if row["task_id"] == task_id)


def running(client: SwarmClient, uuid: str) -> bool:
    return any(e.episode_uuid == uuid for e in client.status().running_episodes)


def counters(*clients: SwarmClient) -> list[dict[str, int]]:
    return [dict(c.status().counters, aborted=c.status().pool.aborted_episodes,
                 discarded=c.status().pool.discarded_episodes) for c in clients]


def call(ep: Any) -> None:
    ep.openai().chat.completions.create(model=ep.model, messages=[{"role": "user", "content": "hi"}], max_tokens=4)


class Client:
    """The game client subprocess, paused at `stop_at`; `uuids` are its episodes by server name."""

    def __init__(self, pair: list[Server], task_id: str, stop_at: str, log: Path):
        self.err = log.open("wb")
        self.proc = subprocess.Popen([sys.executable, str(CLIENT), pair[0].url, pair[1].url, task_id, stop_at],
                                     cwd=ROOT, stdout=subprocess.PIPE, stderr=self.err, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.log = log
        self.uuids = json.loads(self.line())
        assert self.line() == f"paused {stop_at}"

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put("")

    def line(self) -> str:
        try:
            line = self.lines.get(timeout=GUARD)
        except queue.Empty:
            line = ""
        if not line:
            raise AssertionError(f"the client said nothing more (exit {self.proc.poll()}): "
                                 f"{self.log.read_text()[-3000:]}")
        return line

    def kill(self) -> None:
        self.proc.kill()  # SIGKILL: no finally, no abort, nothing more reaches the servers
        self.proc.wait(timeout=30)
        self.err.close()


def test_end_on_two_servers_stores_both_and_counts_them_in_their_groups(pair):
    s1, s2 = pair
    with SwarmClient(s1.url) as c1, SwarmClient(s2.url) as c2:
        before = counters(c1, c2)
        with open_episodes({"server1": c1, "server2": c2}, Task(task_id="atomic-ok"), timeout=300) as eps:
            for ep in eps.values():
                call(ep)
            uuids = {name: ep.uuid for name, ep in eps.items()}
            results = eps.end({"server1": 1.0, "server2": 0.25})
        for (name, server, client, reward), old in zip((("server1", s1, c1, 1.0), ("server2", s2, c2, 0.25)), before,
                                                           strict=True):
            assert results[name].episode_uuid == uuids[name] and results[name].txn
            assert stored(server, uuids[name]) == [("atomic-ok", reward, "completed")]
            assert group_size(client, "atomic-ok") == 1
            status = client.status()
            assert status.prepared_count == 0 and not running(client, uuids[name])
            assert status.counters["episodes_prepared"] == old["episodes_prepared"] + 1
            assert status.counters["episodes_ended"] == old["episodes_ended"] + 1  # stored once, however committed


def test_client_killed_after_both_prepared_both_servers_commit_by_themselves(pair, tmp_path):
    s1, s2 = pair
    with SwarmClient(s1.url) as c1, SwarmClient(s2.url) as c2:
        before = counters(c1, c2)
        client = Client(pair, "atomic-both", "commit:server1", tmp_path / "client.log")
        client.kill()
        for name, server, sc, reward, old in (("server1", s1, c1, 1.0, before[0]), ("server2", s2, c2, 0.0, before[1])):
            rows = until(f"{name} commits its prepared episode",
                         lambda server=server, name=name: stored(server, client.uuids[name]))
            assert rows == [("atomic-both", reward, "completed")]
            assert group_size(sc, "atomic-both") == 1
            assert sc.status().counters["peer_commits"] == old["peer_commits"] + 1  # settled by asking its peer


def test_client_killed_after_preparing_on_server1_only_nothing_is_recorded(pair, tmp_path):
    s1, s2 = pair
    with SwarmClient(s1.url) as c1, SwarmClient(s2.url) as c2:
        before = counters(c1, c2)
        client = Client(pair, "atomic-one", "prepare:server2", tmp_path / "client.log")
        client.kill()
        until("server1 aborts its prepared episode", lambda: not running(c1, client.uuids["server1"]))
        until("server2's open episode is aborted", lambda: not running(c2, client.uuids["server2"]))
        after = counters(c1, c2)
        for name, server, sc, old, new in (("server1", s1, c1, before[0], after[0]),
                                          ("server2", s2, c2, before[1], after[1])):
            assert stored(server, client.uuids[name]) == []
            assert group_size(sc, "atomic-one") == 0
            assert new["aborted"] == old["aborted"] + 1
        assert after[0]["peer_aborts"] == before[0]["peer_aborts"] + 1  # server1 asked server2, which had not prepared


def test_client_killed_after_committing_on_server1_server2_commits_after_asking(pair, tmp_path):
    s1, s2 = pair
    with SwarmClient(s1.url) as c1, SwarmClient(s2.url) as c2:
        before = counters(c2)[0]
        client = Client(pair, "atomic-half", "commit:server2", tmp_path / "client.log")
        assert stored(s1, client.uuids["server1"]) == [("atomic-half", 1.0, "completed")]  # committed before the pause
        client.kill()
        rows = until("server2 commits after asking server1", lambda: stored(s2, client.uuids["server2"]))
        assert rows == [("atomic-half", 0.0, "completed")]
        assert group_size(c1, "atomic-half") == 1 and group_size(c2, "atomic-half") == 1
        assert c2.status().counters["peer_commits"] == before["peer_commits"] + 1


def _peers(*eps: Any) -> list[dict[str, str]]:
    return [{"url": ep.client.url, "episode_uuid": ep.uuid, "api_key": ep.api_key} for ep in eps]


def test_a_late_prepare_after_a_peer_driven_abort_is_refused(pair):
    s1, s2 = pair
    task = Task(task_id="atomic-late")
    with SwarmClient(s1.url) as c1, SwarmClient(s2.url) as c2:
        ep1, ep2 = c1.begin(task, timeout=300), c2.begin(task, timeout=300)
        call(ep1)
        call(ep2)
        txn = secrets.token_hex(16)
        c1.prepare_episode(task, ep1.uuid, WorkflowOutput(reward=1.0), txn, _peers(ep1, ep2))
        until("server1 settles (server2 never prepared)", lambda: not running(c1, ep1.uuid))
        with pytest.raises(SwarmHTTPError) as late:
            c2.prepare_episode(task, ep2.uuid, WorkflowOutput(reward=0.0), txn, _peers(ep1, ep2))
        assert late.value.status == 409 and late.value.code == "transaction_aborted"
        assert "Nothing of this game is stored on any server" in str(late.value)
        assert "play it again with new episodes" in str(late.value)
        with pytest.raises(SwarmHTTPError) as commit:  # the client may not commit what was aborted either
            c1.commit_episode(ep1.uuid, txn)
        assert commit.value.status == 409 and commit.value.code == "transaction_aborted"
        with pytest.raises(openai.APIStatusError) as gone:  # the aborted episode's key no longer calls the model
            call(ep2)
        assert gone.value.status_code == 410
        assert stored(s1, ep1.uuid) == [] and stored(s2, ep2.uuid) == []


def test_a_failed_prepare_aborts_the_game_on_both_servers(pair):
    s1, s2 = pair
    with SwarmClient(s1.url) as c1, SwarmClient(s2.url) as c2:
        with pytest.raises(SwarmHTTPError) as refused, \
                open_episodes({"server1": c1, "server2": c2}, Task(task_id="atomic-bad"), timeout=300) as eps:
            for ep in eps.values():
                call(ep)
            uuids = {name: ep.uuid for name, ep in eps.items()}
            eps.end({"server1": 1.0, "server2": 1e7})  # server2 refuses the reward: server1 was prepared already
        assert refused.value.code == "reward_out_of_range"
        until("server1's prepared episode aborts", lambda: not running(c1, uuids["server1"]))
        assert not running(c2, uuids["server2"])
        assert stored(s1, uuids["server1"]) == [] and stored(s2, uuids["server2"]) == []
        assert group_size(c1, "atomic-bad") == 0 and group_size(c2, "atomic-bad") == 0


def test_a_prepared_episode_is_closed_and_waits_for_an_unreachable_peer(pair):
    s1, _ = pair
    task = Task(task_id="atomic-lonely")
    with SwarmClient(s1.url) as c1:
        ep = c1.begin(task, timeout=15)  # the idle timeout this test waits out
        call(ep)
        nowhere = {"url": f"http://127.0.0.1:{free_port()}", "episode_uuid": "f" * 32, "api_key": "k"}
        bad = httpx.post(f"{s1.url}/episode/prepare", headers={"Authorization": f"Bearer {ep.api_key}"},
                         json={"episode_uuid": ep.uuid, "task": {"task_id": "atomic-lonely"}, "output": {"reward": 1},
                               "txn": "t" * 16, "peers": [nowhere, {**nowhere, "episode_uuid": "e" * 32}]})
        assert bad.status_code == 400 and "this one" in bad.json()["error"]["message"]  # says what to send
        before = counters(c1)[0]
        txn = secrets.token_hex(16)
        c1.prepare_episode(task, ep.uuid, WorkflowOutput(reward=1.0), txn, [*_peers(ep), nowhere])
        assert c1.status().prepared_count >= 1
        with pytest.raises(openai.ConflictError, match="prepared to end"):
            call(ep)
        with pytest.raises(SwarmHTTPError) as end:
            ep.end(1.0)
        assert end.value.code == "episode_prepared" and "/episode/commit" in str(end.value)
        with pytest.raises(SwarmHTTPError) as abort:  # it may not abort alone: its peer may have prepared
            c1.abort_episode(ep.uuid)
        assert abort.value.code == "transaction_pending" and "settles it itself" in str(abort.value)
        # the peer never answers: after the episode's idle timeout it is discarded, counted and reported
        until("the unsettled episode is discarded", lambda: not running(c1, ep.uuid))
        status = c1.status()
        assert status.pool.discarded_episodes == before["discarded"] + 1
        assert any(txn in error and "could not be reached" in error for error in status.errors)
        assert stored(s1, ep.uuid) == []
