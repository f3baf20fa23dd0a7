"""Fixtures of the security regression tests: real `vibe-rl swarm start` processes on loopback."""

from __future__ import annotations

import sys

import httpx
import pytest
from swarm.conftest import FAST, Server, admin, make_server  # noqa: F401  (fixtures and helpers shared)

from vibe_rl.swarm import SwarmClient, TrainJob

ROOT_CLI = [sys.executable, "-c", "from vibe_rl.cli import main; main()"]


def rolling(server: Server) -> SwarmClient:
    client = SwarmClient(server.url)
    client.auto_sync_train_config_and_start_engine(TrainJob(), verbose=False)
    return client


@pytest.fixture(scope="module")
def server(tmp_path_factory, tiny_model_dir):
    """One ROLLING server shared by a module's tests."""
    srv = Server(tmp_path_factory.mktemp("sec") / "exp", FAST).start()
    rolling(srv).close()
    yield srv
    srv.stop()


def error(resp: httpx.Response, status: int) -> dict:
    assert resp.status_code == status, resp.text
    return resp.json()["error"]
