"""One game on two servers from asyncio code: `open_async_episodes` and `await eps.end` record it on both or on
neither, abort both on an exception, and leave nothing behind when the task is cancelled while it prepares.

Two real servers on loopback with the tiny model (`--prepared-timeout 1`), AsyncSwarmClient and AsyncOpenAI.
Every wait is a poll of a state (the status, the SQLite store) under a generous guard deadline
(`until` of test_atomic_end); nothing asserts on time.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.swarm import test_atomic_end as atomic
from tests.swarm.test_atomic_end import group_size, running, stored, until
from vibe_rl.errors import ConfigError
from vibe_rl.swarm import AsyncSwarmClient, NotAnEpisodeError, SwarmClient, Task, open_async_episodes
from vibe_rl.swarm.client.episodes import open_episodes

pair = atomic.pair  # server1 and server2 (the fixture of test_atomic_end; this module starts its own two)


async def call(ep: Any) -> None:
    await ep.openai().chat.completions.create(model=ep.model, messages=[{"role": "user", "content": "hi"}],
                                              max_tokens=4)


def counts(client: SwarmClient) -> dict[str, int]:
    status = client.status()
    return dict(status.counters, aborted=status.pool.aborted_episodes)


def settled(client: SwarmClient, uuid: str) -> bool:
    """Neither running nor prepared on that server any more (stored, aborted or discarded)."""
    status = client.status()
    return not any(e.episode_uuid == uuid for e in status.running_episodes) and status.prepared_count == 0


class GatedClient(AsyncSwarmClient):
    """An AsyncSwarmClient whose prepare waits at a gate before it sends anything: the test cancels the game's
    task there, after the other server's episode has really prepared."""

    def __init__(self, url: str):
        super().__init__(url)
        self.at_gate, self.gate = asyncio.Event(), asyncio.Event()

    async def prepare_episode(self, *args: Any, **kw: Any) -> dict[str, Any]:
        self.at_gate.set()
        await self.gate.wait()
        return await super().prepare_episode(*args, **kw)


def test_an_async_game_on_two_servers_is_stored_on_both(pair):
    s1, s2 = pair

    async def main() -> tuple[dict, dict]:
        async with AsyncSwarmClient(s1.url) as a1, AsyncSwarmClient(s2.url) as a2:
            async with open_async_episodes({"server1": a1, "server2": a2}, Task(task_id="async-atomic-ok"),
                                           timeout=300) as eps:
                await asyncio.gather(*(call(ep) for ep in eps.values()))
                uuids = {name: ep.uuid for name, ep in eps.items()}
                results = await eps.end({"server1": 1.0, "server2": 0.25})
            assert all(ep.closed for ep in eps.values())
            return uuids, results

    with SwarmClient(s1.url) as c1, SwarmClient(s2.url) as c2:
        before = [counts(c1), counts(c2)]
        uuids, results = asyncio.run(main())
        assert results["server1"].txn and results["server1"].txn == results["server2"].txn  # one transaction
        for (name, server, client, reward), old in zip((("server1", s1, c1, 1.0), ("server2", s2, c2, 0.25)), before,
                                                           strict=True):
            assert results[name].episode_uuid == uuids[name] and results[name].llm_calls == 1
            assert stored(server, uuids[name]) == [("async-atomic-ok", reward, "completed")]
            assert group_size(client, "async-atomic-ok") == 1 and settled(client, uuids[name])
            new = counts(client)
            assert new["episodes_prepared"] == old["episodes_prepared"] + 1  # the two-phase end, not a plain end
            assert new["episodes_ended"] == old["episodes_ended"] + 1


def test_an_exception_in_the_block_aborts_on_both_servers(pair):
    s1, s2 = pair

    async def main() -> dict[str, str]:
        uuids: dict[str, str] = {}
        async with AsyncSwarmClient(s1.url) as a1, AsyncSwarmClient(s2.url) as a2:
            with pytest.raises(ValueError, match="scoring failed"):
                async with open_async_episodes({"server1": a1, "server2": a2}, Task(task_id="async-atomic-raise"),
                                               timeout=300) as eps:
                    await asyncio.gather(*(call(ep) for ep in eps.values()))
                    uuids.update({name: ep.uuid for name, ep in eps.items()})
                    raise ValueError("scoring failed")
            assert all(ep.closed for ep in eps.values())
        return uuids

    with SwarmClient(s1.url) as c1, SwarmClient(s2.url) as c2:
        before = [counts(c1), counts(c2)]
        uuids = asyncio.run(main())
        for (name, server, client), old in zip((("server1", s1, c1), ("server2", s2, c2)), before, strict=True):
            assert not running(client, uuids[name])  # the aborts were answered before the block re-raised
            assert stored(server, uuids[name]) == [] and group_size(client, "async-atomic-raise") == 0
            assert counts(client)["aborted"] == old["aborted"] + 1


def test_a_task_cancelled_while_the_game_prepares_leaves_nothing_on_either_server(pair):
    """server1's episode has really prepared; the task is cancelled while server2's prepare waits at its gate:
    server2's open episode is aborted, server1's prepared one settles (its peer aborted) and aborts."""
    s1, s2 = pair

    async def main() -> dict[str, str]:
        uuids: dict[str, str] = {}
        async with AsyncSwarmClient(s1.url) as a1, GatedClient(s2.url) as a2:
            async def play() -> None:
                async with open_async_episodes({"server1": a1, "server2": a2}, Task(task_id="async-atomic-cancel"),
                                               timeout=300) as eps:
                    await asyncio.gather(*(call(ep) for ep in eps.values()))
                    uuids.update({name: ep.uuid for name, ep in eps.items()})
                    await eps.end({"server1": 1.0, "server2": 0.0})

            game = asyncio.ensure_future(play())
            await a2.at_gate.wait()  # server1 answered `prepared` before server2's prepare was reached
            with SwarmClient(s1.url) as c1:
                assert c1.status().prepared_count == 1
            game.cancel()
            with pytest.raises(asyncio.CancelledError):
                await game
        return uuids

    with SwarmClient(s1.url) as c1, SwarmClient(s2.url) as c2:
        before = [counts(c1), counts(c2)]
        uuids = asyncio.run(main())
        for (name, server, client), old in zip((("server1", s1, c1), ("server2", s2, c2)), before, strict=True):
            until(f"{name} settles its episode", lambda client=client, name=name: settled(client, uuids[name]))
            assert stored(server, uuids[name]) == [] and group_size(client, "async-atomic-cancel") == 0
            assert counts(client)["aborted"] == old["aborted"] + 1
        assert counts(c1)["peer_aborts"] == before[0]["peer_aborts"] + 1  # server1 asked server2: aborted


def test_games_cancelled_at_any_moment_of_their_end_are_stored_on_both_servers_or_on_neither(pair):
    """`await eps.end` under asyncio.wait_for with timeouts spread over an end's own latency: cancelled before
    a prepare, with one on the wire, or while committing. Each game ends up recorded on both or on neither."""
    s1, s2 = pair

    async def main() -> list[tuple[dict[str, str], bool]]:
        games: list[tuple[dict[str, str], bool]] = []
        async with AsyncSwarmClient(s1.url) as a1, AsyncSwarmClient(s2.url) as a2:
            servers, clock = {"server1": a1, "server2": a2}, asyncio.get_running_loop().time
            async with open_async_episodes(servers, Task(task_id="async-sweep-warm"), timeout=300) as eps:
                await asyncio.gather(*(call(ep) for ep in eps.values()))
                start = clock()
                await eps.end({"server1": 0.0, "server2": 0.0})
                latency = clock() - start  # of an end in two phases
            for i in range(16):
                uuids: dict[str, str] = {}
                try:
                    async with open_async_episodes(servers, Task(task_id=f"async-sweep-{i}"), timeout=300) as eps:
                        await asyncio.gather(*(call(ep) for ep in eps.values()))
                        uuids.update({name: ep.uuid for name, ep in eps.items()})
                        await asyncio.wait_for(eps.end({"server1": 1.0, "server2": 0.0}), latency * 2 * i / 16)
                    games.append((uuids, False))
                except asyncio.TimeoutError:
                    games.append((uuids, True))
        return games

    games = asyncio.run(main())
    assert games[0][1], "wait_for(..., 0) cancels the end before it starts"
    outcomes: list[str] = []
    with SwarmClient(s1.url) as c1, SwarmClient(s2.url) as c2:
        for uuids, cancelled in games:
            until("both servers settle the game", lambda uuids=uuids: settled(c1, uuids["server1"])
                  and settled(c2, uuids["server2"]))
            on = [bool(stored(s1, uuids["server1"])), bool(stored(s2, uuids["server2"]))]
            assert on in ([True, True], [False, False]), (uuids, cancelled, on)
            assert cancelled or on == [True, True]
            outcomes.append(f"{'cancelled' if cancelled else 'ended'}/{'stored' if on[0] else 'none'}")
    print({outcome: outcomes.count(outcome) for outcome in sorted(set(outcomes))})


def test_each_open_episodes_takes_only_its_own_kind_of_client(pair):
    s1, _ = pair

    async def main() -> None:
        async with AsyncSwarmClient(s1.url) as a1:
            with SwarmClient(s1.url) as c1:
                running_before = c1.status().running_count
                with pytest.raises(ConfigError, match="open_async_episodes takes AsyncSwarmClients"):
                    async with open_async_episodes({"a": a1, "b": c1}, Task(task_id="x")):
                        pass
                with pytest.raises(ConfigError, match="use `async with open_async_episodes"):
                    with open_episodes({"a": a1, "b": c1}, Task(task_id="x")):
                        pass
                with pytest.raises(NotAnEpisodeError, match="async with open_async_episodes"):
                    with open_async_episodes({"a": a1}, Task(task_id="x")):
                        pass
                with pytest.raises(NotAnEpisodeError, match="uses AsyncSwarmClient"):
                    async with open_episodes({"a": a1}, Task(task_id="x")):
                        pass
                with pytest.raises(NotAnEpisodeError):
                    open_async_episodes({"a": a1}, Task(task_id="x"))["a"]
                assert c1.status().running_count == running_before  # nothing began

    asyncio.run(main())
