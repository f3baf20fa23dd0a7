"""The server's running episodes: found by id (control calls) and by key (model calls).

Rules:
- `open` makes an episode with a fresh random key (`secrets.token_urlsafe`), one key per episode.
- An episode that ends, is aborted, discarded or abandoned is forgotten: its id and key are kept
  (bounded, oldest dropped first) with the reason, so a later call gets 410 naming it instead of
  a bare 404/401, and its key stays known, so a retried `end` sent with that key is authorized.
- `end` and `abort` need the episode's own key or the admin token (`authorize`).
- A prepared episode (the first phase of a two-phase end, `txn.py`) stays running but takes no model calls
  (409 `episode_prepared`) and is never discarded as idle: its transaction settles it.
"""

from __future__ import annotations

import secrets
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from vibe_rl.rl.samples import Turn
from vibe_rl.swarm.auth import same_token
from vibe_rl.swarm.server.chat import PrefixCache
from vibe_rl.swarm.server.errors import ApiError


@dataclass
class Episode:
    uuid: str
    api_key: str
    timeout: float
    created: float = field(default_factory=time.monotonic)
    last_activity: float = field(default_factory=time.monotonic)
    turns: list[Turn] = field(default_factory=list)
    llm_calls: int = 0
    stored_bytes: int = 0  # request bytes of the chat calls admitted (bounds.check_episode)
    admitted: int = 0  # chat calls admitted (bounds.check_episode)
    inflight: int = 0
    prefixes: PrefixCache = field(default_factory=PrefixCache)  # token ids of earlier turns, reused
    snapshots: dict[str, int] = field(default_factory=dict)  # static model -> checkpoint step it plays here
    kind: str = "train"  # "eval": stored with status 'eval', its reward logged as eval/*, never trained on
    group: str | None = None  # the GRPO group key named at begin (None: the task_id of its end)
    prepared: Any = None  # txn.Prepared while the episode is prepared (a two-phase end): closed to model calls


class Tombstones:
    """Bounded memory of why an episode or key is gone (for clear 410 messages)."""

    def __init__(self, size: int = 100_000):
        self.size, self._d = size, OrderedDict()

    def add(self, key: str, reason: Any) -> None:
        self._d[key] = reason
        if len(self._d) > self.size:
            self._d.popitem(last=False)

    def get(self, key: str) -> Any:
        return self._d.get(key)


class EpisodeRegistry:
    """Running episodes by id and by key, and why the ones that are gone went."""

    def __init__(self) -> None:
        self.running: dict[str, Episode] = {}
        self.by_key: dict[str, Episode] = {}
        self.gone = Tombstones()
        self.key_of = Tombstones()  # episode id -> its key, after it is gone (a retried end may use the key)

    def __len__(self) -> int:
        return len(self.running)

    def open(self, timeout: float, kind: str, group: str | None = None) -> Episode:
        ep = Episode(uuid=uuid.uuid4().hex, api_key=secrets.token_urlsafe(32), timeout=timeout, kind=kind,
                     group=group)
        self.reopen(ep)
        return ep

    def reopen(self, ep: Episode) -> None:
        """Register `ep` (again: an end that could not be stored leaves the episode open)."""
        self.running[ep.uuid] = ep
        self.by_key[ep.api_key] = ep

    def forget(self, ep: Episode, reason: str) -> None:
        self.running.pop(ep.uuid, None)
        self.by_key.pop(ep.api_key, None)
        self.gone.add(ep.uuid, reason)
        self.gone.add(ep.api_key, reason)
        self.key_of.add(ep.uuid, ep.api_key)

    def knows_key(self, key: str) -> bool:
        """An episode key of this server: running, or of an episode that is gone."""
        return key in self.by_key or self.gone.get(key) is not None

    def idle(self, now: float) -> list[Episode]:
        """Episodes with no call in flight, idle past their discard timeout (a prepared one waits for its
        transaction instead: `vibe_rl.swarm.server.txn`)."""
        return [e for e in self.running.values()
                if not e.inflight and e.prepared is None and now - e.last_activity > e.timeout]

    def key_for(self, episode_uuid: str) -> str | None:
        """The key of a running or gone episode (None when unknown)."""
        ep = self.running.get(episode_uuid)
        return ep.api_key if ep is not None else self.key_of.get(episode_uuid)

    @staticmethod
    def authorize(episode_uuid: str, key: str | None, credential: str | None, admin: bool) -> None:
        """end/abort: the admin token, or this episode's own key (Authorization: Bearer <key>)."""
        if admin or (key is not None and same_token(credential, key)):
            return
        raise ApiError(401, f"Only episode {episode_uuid}'s own API key (ep.api_key of swarm.episode(task), or "
                            "begin_episode's api_key, sent as `Authorization: Bearer <key>`) or the server's admin "
                            "token may end or abort it.",
                       code="invalid_api_key" if credential else "missing_api_key")

    def lookup(self, episode_uuid: str) -> Episode:
        ep = self.running.get(episode_uuid)
        if ep is not None:
            return ep
        reason = self.gone.get(episode_uuid)
        if reason:
            raise ApiError(410, f"Episode {episode_uuid} is gone: {reason}.", code="episode_gone",
                           param="episode_uuid")
        raise ApiError(404, f"Unknown episode {episode_uuid}. Use the episode_uuid that this server returned "
                            "(ep.uuid of swarm.episode(task), or begin_episode's); each server has its own episodes, "
                            "and a restarted server forgets the episodes that were running.",
                       code="episode_not_found", param="episode_uuid")

    def for_key(self, api_key: str | None) -> Episode:
        """The running episode a model call's key belongs to."""
        if not api_key:
            raise ApiError(401, "Missing API key. Use the episode's own key: ep.openai() of swarm.episode(task), or "
                                "openai.OpenAI(base_url=ep.base_url, api_key=ep.api_key).", code="missing_api_key")
        ep = self.by_key.get(api_key)
        if ep is not None and ep.prepared is not None:
            raise ApiError(409, f"Episode {ep.uuid} is prepared to end (transaction {ep.prepared.txn}): it takes no "
                                "more model calls. Make every call of a game before eps.end(...); a new game "
                                "begins new episodes.", code="episode_prepared")
        if ep is not None:
            return ep
        reason = self.gone.get(api_key)
        if reason:
            raise ApiError(410, f"This episode's API key no longer works: {reason}.", code="episode_gone")
        raise ApiError(401, "Unknown API key. Each episode has its own key (ep.api_key of swarm.episode(task), or "
                            "begin_episode's); keys of another server or of a restarted server do not work here: "
                            "begin a new episode.", code="invalid_api_key")
