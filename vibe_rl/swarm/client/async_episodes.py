"""One game's episodes on several AsyncSwarmClients: `open_episodes` (`episodes.py`) for asyncio code.

    async with open_async_episodes({"server1": swarm_1, "server2": swarm_2}, task, timeout=600) as eps:
        llm = eps["server1"].openai()                # each an AsyncEpisode; openai() is an AsyncOpenAI
        ...
        await eps.end({"server1": 1.0, "server2": 0.0})

It means what the sync `open_episodes` means: the same group keys (`group_keys`), the same checks of every
output before anything is sent, every episode still open aborted when the block raises, is cancelled or is
left without `end`; episodes all on one server end one by one, on several servers in two phases with the
same protocol and request bodies (`twophase.py`; the protocol is `vibe_rl.swarm.server.txn`), so the game
is recorded on every server or on none.

Cancellation (asyncio.wait_for, asyncio.timeout, a cancelled task):
- while the episodes begin: each begin is cancel-safe (`async_client.py`); those already open are aborted.
- while they prepare: every episode is aborted (those not prepared first, as the sync end does), so no server
  records the game. A prepare cancelled on the wire may still reach its server; its abort, or a peer's
  question, settles it there as aborted (txn.py, rules 3 and 4). Only when the last prepare had already been
  answered is the game decided: it then commits on every server (the abort logs a warning saying so).
- while they commit: the game is decided, and `eps.end` raises CancelledError although it commits on every
  server. The commits already sent finish in the background; a server whose commit never arrives (the
  process died too) commits by itself after its `--prepared-timeout`, when it asks its peers.
The aborts and commits run to their end even when cancelled again; `aclose()` of a client (the end of
`async with AsyncSwarmClient`) waits for them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from vibe_rl.errors import SwarmError
from vibe_rl.schema import Task, WorkflowOutput
from vibe_rl.swarm.client import twophase
from vibe_rl.swarm.client.async_client import AsyncBlock, AsyncEpisode, AsyncSwarmClient
from vibe_rl.swarm.client.episodes import game_tasks
from vibe_rl.swarm.client.outputs import checked_outputs

if TYPE_CHECKING:
    from vibe_rl.swarm.protocol import EndEpisodeResponse

log = logging.getLogger("vibe_rl.swarm.episodes")


class AsyncEpisodes(dict[str, AsyncEpisode]):
    """Episodes opened together on AsyncSwarmClients, by name; see `open_async_episodes`."""

    async def end(self, outputs: Mapping[str, float | WorkflowOutput]) -> dict[str, EndEpisodeResponse]:
        """End every episode with its own output, as `Episodes.end`: a name without an output is an error
        (nothing is sent); on several servers the game ends in two phases (`end_together`), on every server
        or on none; on one server each episode ends in one step."""
        checked = checked_outputs(self, outputs)
        if len({twophase.server_of(ep) for ep in self.values()}) > 1:
            if twophase.can_end_together(self):
                return await end_together(self, checked)
            log.warning("eps.end: a client of these episodes has no prepare_episode/commit_episode, so they end "
                        "one after the other (not atomically)")
        return {name: await episode.end(checked[name]) for name, episode in self.items()}


def _held(task: asyncio.Future, clients: Iterable[AsyncSwarmClient]) -> asyncio.Future:
    """`task`, counted among each client's background calls (their `drain()` / `aclose()` wait for it)."""
    for client in clients:
        client._background.add(task)
        task.add_done_callback(client._background.discard)
    return task


async def abort_in_order(episodes: list[AsyncEpisode]) -> None:
    """Abort each episode, in this order, in a background task that runs to its end even when the caller is
    cancelled (again); the caller waits for it unless it is cancelled meanwhile."""
    async def abort_each() -> None:
        for ep in episodes:
            await ep.abort()

    if episodes:
        clients = {id(ep.client): ep.client for ep in episodes}.values()
        await asyncio.shield(_held(asyncio.ensure_future(abort_each()), clients))


async def end_together(episodes: Mapping[str, AsyncEpisode],
                       outputs: Mapping[str, WorkflowOutput]) -> dict[str, EndEpisodeResponse]:
    """`twophase.end_together` for AsyncSwarmClient: prepare every episode one by one, then commit all at once
    (module doc: what a cancellation in each phase does); outputs are already checked (`AsyncEpisodes.end`)."""
    from vibe_rl.swarm.protocol import EndEpisodeResponse

    txn, peers = twophase.transaction(episodes)
    prepared: list[str] = []
    try:
        for name, ep in episodes.items():
            await ep.client.prepare_episode(ep.task, ep.uuid, outputs[name], txn, peers)
            prepared.append(name)
    except BaseException:  # an error, or a cancellation: the game must be recorded nowhere
        await abort_in_order([episodes[name] for name in twophase.abort_order(episodes, prepared)])
        raise
    for ep in episodes.values():  # decided: every server commits, by this client's commit or by itself
        ep.closed = True
    commits = {name: ep.client._spawn(ep.client.commit_episode(ep.uuid, txn)) for name, ep in episodes.items()}
    try:
        await asyncio.shield(asyncio.gather(*commits.values(), return_exceptions=True))
    finally:
        for ep in episodes.values():
            await ep._release()
    results: dict[str, EndEpisodeResponse] = {}
    failed: dict[str, SwarmError] = {}
    for name, call in commits.items():
        exc = call.exception()
        if isinstance(exc, SwarmError):
            failed[name] = exc
        elif exc is not None:
            raise exc
        else:
            results[name] = EndEpisodeResponse.model_validate(call.result())
    if failed:
        raise twophase.commit_failed(txn, failed)
    return results


class AsyncEpisodesBlock(AsyncBlock):
    """What `open_async_episodes` returns: `async with` it; nothing begins before that."""

    WHAT = "open_async_episodes(...)"
    WRITE = ("`async with open_async_episodes(...) as eps:` ... `await eps.end({name: reward})`, or one "
             "`await swarm.begin(task)` per episode to end or abort each yourself")

    def __init__(self, servers: Mapping[str, AsyncSwarmClient], task: Task | Mapping[str, Task],
                 timeout: float | None, eval: bool, group: str | None):
        self._servers, self._task, self._timeout, self._eval, self._group = servers, task, timeout, eval, group
        self._eps: AsyncEpisodes | None = None

    async def __aenter__(self) -> AsyncEpisodes:
        tasks, keys = game_tasks(self._servers, self._task, self._group, coroutines=True)
        opened = AsyncEpisodes()
        try:
            for name, client in self._servers.items():
                opened[name] = await client.begin(tasks[name], timeout=self._timeout, eval=self._eval,
                                                  group=keys[name])
        except BaseException:
            await abort_in_order(list(opened.values()))
            raise
        self._eps = opened
        return opened

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        open_ones = [ep for ep in (self._eps or {}).values() if not ep.closed]
        await abort_in_order(open_ones)
        if open_ones and exc_type is None:
            raise SwarmError(f"{len(open_ones)} episode(s) left the `async with` block without end(reward) (task "
                             f"{open_ones[0].task.task_id}); they were aborted. Call `await eps.end({{name: reward}})` "
                             "(or `await ep.abort()` of each) inside the block.")


def open_async_episodes(servers: Mapping[str, AsyncSwarmClient], task: Task | Mapping[str, Task],
                        timeout: float | None = None, eval: bool = False, group: str | None = None
                        ) -> AsyncEpisodesBlock:
    """`open_episodes` for AsyncSwarmClients: one episode per name in `servers` (the same client may appear
    under several names, e.g. one episode per team), all of `task` or each of its own (`{name: Task}`);
    `async with` it, `await eps.end({name: reward_or_output})`; aborted together on an exception or a
    cancellation (module doc). `group`: the GRPO group key (default: each task_id; see `group_keys`)."""
    return AsyncEpisodesBlock(servers, task, timeout, eval, group)
