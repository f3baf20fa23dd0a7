"""Fixtures of the observability tests."""

from __future__ import annotations

import pytest
from obs_kit import LiveServer


@pytest.fixture
def live_server(tmp_path, tiny_model_dir):
    """live_server(sets) -> a started LiveServer; stopped at teardown."""
    made: list[LiveServer] = []

    def make(sets: list[str] = (), name: str = "exp", extra: list[str] = ()) -> LiveServer:
        made.append(LiveServer(tmp_path / name, list(sets), list(extra)))
        return made[-1]

    yield make
    for server in made:
        server.stop()
