"""The client's side of the two-phase end: one game's episodes on several servers end together or not at all.

`Episodes.end` calls `end_together` when its episodes are on more than one server (one server: each episode
ends in one step, as before). The protocol, and how the servers settle a game whose client died between the
phases, is the module doc of `vibe_rl.swarm.server.txn`; in short:

1. every episode is prepared (`POST /episode/prepare` with one fresh transaction id and the list of all
   the game's episodes: server URL, episode id, episode key): its reward is held, it takes no more calls;
2. once all are prepared, each is committed (`POST /episode/commit`): stored and pooled.

A prepare that fails (an error, an interrupt) aborts every episode: those not prepared are dropped, a
prepared one settles with its peers at once (it aborts, unless every episode had in fact prepared: then the
game commits everywhere, and the abort logs a warning saying so). Once all are prepared the game is decided:
a commit that does not arrive (the client died, a server was unreachable) is made by that server itself after
its `--prepared-timeout`, when it asks its peers.

`vibe_rl.swarm.client.async_episodes` is the same end for AsyncSwarmClient; the pure parts (the transaction
and its peers, the abort order, the commit failure) are shared from here.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from vibe_rl.errors import SwarmError
from vibe_rl.schema import Task, WorkflowOutput

if TYPE_CHECKING:
    from vibe_rl.swarm.protocol import EndEpisodeResponse

log = logging.getLogger("vibe_rl.swarm.episodes")


class TwoPhaseServer(Protocol):
    """What a server's client needs for `end_together` (SwarmClient fits; AsyncSwarmClient's are coroutines):
    its root URL, prepare and commit."""

    url: str

    def prepare_episode(self, task: Task, episode_uuid: str, workflow_output: WorkflowOutput, txn: str,
                        peers: list[dict[str, str]]) -> dict[str, Any]: ...

    def commit_episode(self, episode_uuid: str, txn: str) -> dict[str, Any]: ...


class Episode(Protocol):
    """What `end_together` needs of an open episode (`episodes.Episode` fits; not imported: it imports this)."""

    client: Any
    uuid: str
    api_key: str
    task: Task
    closed: bool

    def abort(self) -> None: ...


def server_of(episode: Episode) -> Any:
    """The server an episode is on: its client's root URL (two clients of one URL are one server)."""
    return getattr(episode.client, "url", None) or id(episode.client)


def can_end_together(episodes: Mapping[str, Episode]) -> bool:
    """Every episode's client speaks the two-phase end (a client written for another server may not)."""
    return all(callable(getattr(ep.client, name, None)) and isinstance(getattr(ep.client, "url", None), str)
               for ep in episodes.values() for name in ("prepare_episode", "commit_episode"))


def transaction(episodes: Mapping[str, Episode]) -> tuple[str, list[dict[str, str]]]:
    """A fresh transaction id and the peers every prepare carries: each episode's server URL, id and own key."""
    peers = [{"url": ep.client.url, "episode_uuid": ep.uuid, "api_key": ep.api_key} for ep in episodes.values()]
    return secrets.token_hex(16), peers


def abort_order(episodes: Mapping[str, Episode], prepared: list[str]) -> list[str]:
    """The names to abort after a failed prepare: those not prepared first; then each prepared one, asking its
    peers, finds them aborted and aborts."""
    return [n for n in episodes if n not in prepared] + prepared


def commit_failed(txn: str, failed: Mapping[str, Exception]) -> SwarmError:
    """The error of commits that failed after every episode was prepared (the game commits anyway)."""
    return SwarmError(f"eps.end: every episode was prepared (transaction {txn}), so the game commits on every "
                      f"server, but the commit of {sorted(failed)} failed: "
                      + "; ".join(f"{name}: {exc}" for name, exc in failed.items())
                      + ". A server that missed its commit commits by itself after its --prepared-timeout (it "
                      "asks its peers); one that restarted since the prepare has lost its episode. Check those "
                      "servers' status (pool.completed_episodes); nothing needs to be sent again.")


def end_together(episodes: Mapping[str, Episode],
                 outputs: Mapping[str, WorkflowOutput]) -> dict[str, EndEpisodeResponse]:
    """Prepare every episode, then commit each (module doc); outputs are already checked (`Episodes.end`).
    `async_episodes.end_together` is the same for AsyncSwarmClient."""
    from vibe_rl.swarm.protocol import EndEpisodeResponse

    txn, peers = transaction(episodes)
    prepared: list[str] = []
    try:
        for name, ep in episodes.items():
            ep.client.prepare_episode(ep.task, ep.uuid, outputs[name], txn, peers)
            prepared.append(name)
    except BaseException:
        for name in abort_order(episodes, prepared):
            episodes[name].abort()
        raise
    for ep in episodes.values():  # decided: every server commits, by this client's commit or by itself
        ep.closed = True
    results: dict[str, EndEpisodeResponse] = {}
    failed: dict[str, SwarmError] = {}
    for name, ep in episodes.items():
        try:
            results[name] = EndEpisodeResponse.model_validate(ep.client.commit_episode(ep.uuid, txn))
        except SwarmError as exc:
            failed[name] = exc
    if failed:
        raise commit_failed(txn, failed)
    return results
