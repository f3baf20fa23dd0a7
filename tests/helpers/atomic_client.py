"""A game client for tests/swarm/test_atomic_end.py: one episode on each of two servers, one model call on
each, then the real `eps.end` (the two-phase end), paused at one step so the test can SIGKILL it there.

    python tests/helpers/atomic_client.py URL_1 URL_2 TASK_ID STOP_AT

It prints one JSON line with the episode ids ({"server1": uuid, "server2": uuid}), then, on reaching STOP_AT
(`prepare:server2`: server1 is prepared; `commit:server1`: both are prepared; `commit:server2`: server1 has
committed), the line `paused STOP_AT`, and waits there to be killed.
"""

from __future__ import annotations

import json
import sys
import time

from vibe_rl.swarm import SwarmClient, Task, open_episodes


class PausingClient(SwarmClient):
    """A real SwarmClient that stops before one step of the two-phase end (the test kills the process there)."""

    def __init__(self, url: str, name: str, stop_at: str):
        super().__init__(url)
        self.name, self.stop_at = name, stop_at

    def _pause(self, step: str) -> None:
        if f"{step}:{self.name}" == self.stop_at:
            print(f"paused {self.stop_at}", flush=True)
            while True:
                time.sleep(3600)

    def prepare_episode(self, *args, **kwargs):
        self._pause("prepare")
        return super().prepare_episode(*args, **kwargs)

    def commit_episode(self, *args, **kwargs):
        self._pause("commit")
        return super().commit_episode(*args, **kwargs)


def main(url_1: str, url_2: str, task_id: str, stop_at: str) -> None:
    servers = {"server1": PausingClient(url_1, "server1", stop_at), "server2": PausingClient(url_2, "server2", stop_at)}
    with open_episodes(servers, Task(task_id=task_id), timeout=300) as eps:
        print(json.dumps({name: ep.uuid for name, ep in eps.items()}), flush=True)
        for name, ep in eps.items():
            ep.openai().chat.completions.create(model=ep.model, messages=[{"role": "user", "content": "hi"}],
                                                max_tokens=4, user=f"{name}:player_1")
        eps.end({"server1": 1.0, "server2": 0.0})
    print("ended", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:5])
