"""The two-phase end: one game's episodes on several servers end together, or not at all.

A game whose seats train on two servers (agent_roll_adv: Who-is-Spy civilians on server1, spies on server2)
holds one episode on each. `Episodes.end` (`vibe_rl.swarm.client.episodes`) ends them with this protocol,
so a client that dies while it ends them leaves no server with half a game: the game joins its GRPO group
on every server or on none. An episode ended alone keeps the one-step `POST /episode/end`.

Protocol. The client coordinates and keeps no log; a transaction it leaves unfinished is settled by the
servers among themselves (cooperative termination).

1. Prepare. The client draws a fresh transaction id T and sends each episode's server
   `POST /episode/prepare` {episode_uuid, task, output, txn: T, peers}; `peers` lists every episode of T,
   this one included, as {url (the server's root URL), episode_uuid, api_key (that episode's own key)}.
   The server checks the reward and metadata as an end does, holds them and answers `prepared`: the
   episode takes no more model calls (409 episode_prepared), is not discarded as idle, and is not stored
   or pooled yet. A repeated prepare of T with the same task and reward answers the same; any other
   prepare of a prepared episode is 409.
2. Commit or abort. Once every server answered `prepared`, the client sends each
   `POST /episode/commit` {episode_uuid, txn: T}: the server stores and pools the episode as `end` does
   (a repeat: already_ended). If a prepare failed (an error, an interrupt), the client aborts every
   episode (`POST /episode/abort`); a prepared episode does not abort alone: it settles at once by rule 4.
3. Outcome. `POST /episode/outcome` {episode_uuid, txn: T}, sent with the episode's own key, answers the
   episode's outcome in T: `prepared` (undecided), `committed` or `aborted`. An episode that is not
   prepared in T answers `aborted`; if it was still open, the question aborts it and records that for T,
   so a prepare of T that arrives later is refused (409 transaction_aborted): T can no longer commit.
   An episode stored by a one-step end answers `committed` (its game is recorded on this server).
4. Termination. A prepared episode that receives neither commit nor abort within
   `ServerConfig.prepared_timeout` (default: its idle timeout, at most 60 s) asks every peer rule 3's
   question, then:
   - a peer answered `committed` -> commit (the client had seen every episode prepared);
   - every peer answered `prepared` -> commit (once all are prepared none can abort: rule 3 aborts only
     unprepared episodes, and a prepared one aborts only by the next line);
   - a peer answered `aborted` -> abort;
   - otherwise (a peer unreachable, 5xx, 429) -> ask again after prepared_timeout. A peer answering 401 or
     404 does not know the episode (it restarted, or predates this protocol): `aborted`.

Why it is atomic: an episode commits only after seeing every peer prepared or one committed, and aborts only
after seeing one aborted. `aborted` is final, and an episode that has prepared never becomes open again, so
"all prepared" and "one aborted" never both hold in one transaction: every episode of T commits, or none.

Not covered (the client dying is; these are failures of a server itself): prepared episodes live in memory,
like every running episode, so a server that restarts or is stopped (`POST /control/stop`) loses its own;
its peers then abort on its 401 unless one of them had already committed. A prepared episode whose peers
stay unreachable for its whole idle timeout is discarded (counted in `discarded_episodes`, with an error in
the status naming its transaction).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from vibe_rl.schema import Task, WorkflowOutput
from vibe_rl.swarm.protocol import OutcomeResponse, PeerEpisode, PrepareEpisodeRequest, TxnEpisodeRequest
from vibe_rl.swarm.server import bounds
from vibe_rl.swarm.server.errors import ApiError
from vibe_rl.swarm.server.registry import Episode, Tombstones

log = logging.getLogger("vibe_rl.swarm.txn")


@dataclass
class Prepared:
    """What a prepared episode holds until its transaction settles."""

    txn: str
    task: Task
    output: WorkflowOutput
    peers: list[PeerEpisode]
    since: float = field(default_factory=time.monotonic)
    commit: bool = False  # decided: commit (a write that failed is retried by the watch)
    settling: asyncio.Future | None = None  # a running ask of the peers (rule 4), shared by whoever waits


class Transactions:
    """The two-phase end of one server (module doc): its endpoints, and the watch of each prepared episode."""

    def __init__(self, serving: Any):
        self.serving = serving
        self.outcomes = Tombstones()  # episode_uuid -> (txn, "committed" | "aborted"), once decided
        self._http: Any = None
        self._tasks: set[asyncio.Future] = set()

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    def bound(self, ep: Episode) -> float:
        """Seconds a prepared episode waits for its commit or abort before it asks its peers (rule 4)."""
        return self.serving.config.prepared_timeout or min(60.0, ep.timeout)

    # ------------------------------------------------------------ endpoints

    async def prepare(self, req: PrepareEpisodeRequest, credential: str | None, admin: bool) -> dict[str, Any]:
        s = self.serving
        bounds.check_end(s.config, req)
        s.registry.authorize(req.episode_uuid, s.registry.key_for(req.episode_uuid), credential, admin)
        answer = {"episode_uuid": req.episode_uuid, "txn": req.txn}
        decided = self.outcomes.get(req.episode_uuid)
        if decided is not None and decided[0] == req.txn:
            if decided[1] == "aborted":
                raise self._aborted(req.episode_uuid, req.txn)
            return {**answer, "outcome": "committed"}
        ep = s.registry.lookup(req.episode_uuid)  # 410 gone (ended, aborted, discarded) / 404
        held = ep.prepared
        if held is not None:
            if held.txn == req.txn and held.task.task_id == req.task.task_id and \
                    held.output.reward == req.output.reward:
                return {**answer, "outcome": "committed" if held.commit else "prepared"}
            raise ApiError(409, f"Episode {ep.uuid} is already prepared in transaction {held.txn} with task_id="
                                f"{held.task.task_id!r} reward={held.output.reward}; a prepare of another transaction, "
                                "task or reward is refused. Commit or abort that transaction (eps.end sends one "
                                "transaction per game).", code="episode_prepared", param="txn")
        s.check_endable(ep, "eps.end / prepare_episode")
        ep.prepared = Prepared(req.txn, req.task, req.output, list(req.peers))
        s.counters["episodes_prepared"] += 1
        self._spawn(self._watch(ep, ep.prepared))
        return {**answer, "outcome": "prepared"}

    async def commit(self, req: TxnEpisodeRequest, credential: str | None, admin: bool) -> dict[str, Any]:
        s = self.serving
        s.registry.authorize(req.episode_uuid, s.registry.key_for(req.episode_uuid), credential, admin)
        decided = self.outcomes.get(req.episode_uuid)
        ep = s.registry.running.get(req.episode_uuid)
        if decided is not None and decided[0] == req.txn and (ep is None or ep.prepared is None):
            if decided[1] == "aborted":
                raise self._aborted(req.episode_uuid, req.txn)
            stored = s.ended_status(req.episode_uuid)
            return {"episode_uuid": req.episode_uuid, "already_ended": True, "txn": req.txn,
                    "status": stored[0] if stored else "completed"}
        ep = s.registry.lookup(req.episode_uuid)  # 410 / 404
        if ep.prepared is None or ep.prepared.txn != req.txn:
            raise ApiError(409, f"Episode {ep.uuid} is not prepared in transaction {req.txn}"
                                + (f" (it is prepared in {ep.prepared.txn})" if ep.prepared else "")
                                + ". Send POST /episode/prepare with this txn to every episode first, and commit "
                                  "only when all answered prepared (eps.end does both).",
                           code="episode_not_prepared", param="txn")
        return await self._commit(ep, ep.prepared)

    async def outcome(self, req: TxnEpisodeRequest, credential: str | None, admin: bool) -> dict[str, Any]:
        """Rule 3 of the module doc: the episode's outcome in the transaction; an open episode is aborted."""
        s, uuid, txn = self.serving, req.episode_uuid, req.txn
        s.registry.authorize(uuid, s.registry.key_for(uuid), credential, admin)

        def answer(outcome: str) -> dict[str, Any]:
            return {"episode_uuid": uuid, "txn": txn, "outcome": outcome}

        ep = s.registry.running.get(uuid)
        if ep is not None and ep.prepared is not None:  # prepared in another transaction: never joins this one
            return answer(("committed" if ep.prepared.commit else "prepared") if ep.prepared.txn == txn else "aborted")
        decided = self.outcomes.get(uuid)
        if decided is not None and decided[0] == txn:
            return answer(decided[1])
        if ep is not None:  # still open: from now on it can never prepare in this transaction
            self.outcomes.add(uuid, (txn, "aborted"))
            s.registry.forget(ep, f"it was aborted with transaction {txn}: a peer server asked how the transaction "
                                  "ended before this episode was prepared (the client ending them together died, or "
                                  "took longer than the peer's --prepared-timeout)")
            s.tally.aborted += 1
            log.info("episode %s aborted with transaction %s (asked by a peer before its prepare)", uuid, txn)
            return answer("aborted")
        stored = s.ended_status(uuid)
        if stored is not None:  # ended by itself (one-step end): its game is recorded here
            return answer("committed")
        if decided is None:
            self.outcomes.add(uuid, (txn, "aborted"))
        return answer("aborted")

    async def abort_prepared(self, ep: Episode) -> dict[str, Any]:
        """The client aborts a prepared episode: it settles with its peers now (rule 4 without the wait)."""
        outcome = await self.settle(ep, ep.prepared)
        if outcome is None:
            bound = self.bound(ep)
            raise ApiError(503, f"Episode {ep.uuid} is prepared in transaction {ep.prepared.txn} and some of its peers "
                                f"cannot be reached, so it cannot abort alone; the server asks them again every "
                                f"{bound:g} s and settles it itself (nothing to do, or retry the abort).",
                           code="transaction_pending", retry_after=bound)
        return {"episode_uuid": ep.uuid, "aborted": outcome == "aborted", "llm_calls": ep.llm_calls,
                "outcome": outcome}

    # ------------------------------------------------------------ settling

    def _live(self, ep: Episode, p: Prepared) -> bool:
        return ep.prepared is p and self.serving.registry.running.get(ep.uuid) is ep

    def _aborted(self, uuid: str, txn: str) -> ApiError:
        return ApiError(409, f"Episode {uuid} was aborted with transaction {txn}: a peer server found it unprepared "
                             "when it asked how the transaction ended (this prepare or commit came too late: the "
                             "client died or took longer than the servers' --prepared-timeout). Nothing of this game "
                             "is stored on any server; play it again with new episodes, and raise --prepared-timeout "
                             "if the prepares are slow.", code="transaction_aborted", param="txn")

    def _spawn(self, coro: Any) -> asyncio.Future:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _commit(self, ep: Episode, p: Prepared) -> dict[str, Any]:
        p.commit = True  # final: peers asked from now on hear `committed`, even while the write runs
        self.outcomes.add(ep.uuid, (p.txn, "committed"))
        if self.serving.store is None:
            raise self.serving._not_ready("the commit")
        result = await self.serving.store_end(ep, p.task, p.output)  # a failed write leaves it prepared
        return {**result, "txn": p.txn}

    def _abort(self, ep: Episode, p: Prepared, reason: str) -> None:
        self.outcomes.add(ep.uuid, (p.txn, "aborted"))
        self.serving.registry.forget(ep, f"it was aborted with its transaction {p.txn}: {reason}")
        self.serving.tally.aborted += 1

    async def settle(self, ep: Episode, p: Prepared) -> str | None:
        """Rule 4 now: the outcome decided (committed, aborted), or None while a peer cannot be reached."""
        if p.settling is None or p.settling.done():
            p.settling = self._spawn(self._settle(ep, p))
        return await asyncio.shield(p.settling)

    async def _settle(self, ep: Episode, p: Prepared) -> str | None:
        s = self.serving
        if not p.commit:
            answers = await asyncio.gather(*(self._ask(peer, p.txn) for peer in p.peers
                                             if peer.episode_uuid != ep.uuid))
            if not self._live(ep, p):  # the client's commit (or a stop) came meanwhile
                decided = self.outcomes.get(ep.uuid)
                return decided[1] if decided is not None and decided[0] == p.txn else None
            if "committed" not in answers and not all(a == "prepared" for a in answers):
                if "aborted" not in answers:
                    return None
                self._abort(ep, p, "a peer episode had not prepared when this server asked (the client died, or "
                                   "aborted the game, between its prepares)")
                s.counters["peer_aborts"] += 1
                log.info("episode %s aborted with transaction %s (a peer had not prepared)", ep.uuid, p.txn)
                return "aborted"
            s.counters["peer_commits"] += 1
            log.info("episode %s commits with transaction %s (its peers: %s)", ep.uuid, p.txn, answers)
        try:
            await self._commit(ep, p)
        except Exception as exc:  # decided; the watch writes it again later
            log.warning("commit of episode %s (transaction %s) failed, retried later: %s", ep.uuid, p.txn, exc)
            s.errors.append(f"commit of episode {ep.uuid} (transaction {p.txn}): {type(exc).__name__}: {exc}")
        return "committed"

    async def _watch(self, ep: Episode, p: Prepared) -> None:
        """Rule 4: after each prepared_timeout without a commit or abort, ask the peers; give up after the
        episode's idle timeout (discarded, counted, and reported in the status's errors)."""
        bound = self.bound(ep)
        while True:
            await asyncio.sleep(bound)
            if not self._live(ep, p):
                return
            if not p.commit and time.monotonic() - p.since > max(ep.timeout, bound):
                self._give_up(ep, p)
                return
            try:
                await self.settle(ep, p)
            except Exception as exc:  # noqa: BLE001 (a background task: reported, then tried again)
                log.exception("settling transaction %s", p.txn)
                self.serving.errors.append(f"settling transaction {p.txn}: {type(exc).__name__}: {exc}")

    def _give_up(self, ep: Episode, p: Prepared) -> None:
        s = self.serving
        self.outcomes.add(ep.uuid, (p.txn, "aborted"))
        waited = time.monotonic() - p.since
        s.registry.forget(ep, f"discarded after its transaction {p.txn} stayed unsettled for {waited:.0f} s (its "
                              "peers could not be reached)")
        s.tally.discarded += 1
        if s.store is not None:
            s.store.set_meta("discarded_episodes", s.tally.discarded)
        s.errors.append(f"episode {ep.uuid} discarded: transaction {p.txn} unsettled after {waited:.0f} s, its peers "
                        f"{[peer.url for peer in p.peers]} could not be reached; if one of them committed, this game "
                        "is recorded there only")
        log.warning("episode %s discarded: transaction %s unsettled, peers unreachable", ep.uuid, p.txn)

    async def _ask(self, peer: PeerEpisode, txn: str) -> str | None:
        """Rule 3's question to one peer: its outcome, or None when it cannot answer now."""
        import httpx

        if self._http is None:
            self._http = httpx.AsyncClient(timeout=httpx.Timeout(10.0))
        try:
            resp = await self._http.post(f"{peer.url}/episode/outcome",
                                         json={"episode_uuid": peer.episode_uuid, "txn": txn},
                                         headers={"Authorization": f"Bearer {peer.api_key}"})
        except httpx.HTTPError as exc:
            log.warning("transaction %s: peer %s did not answer (%s: %s); asked again later", txn, peer.url,
                        type(exc).__name__, exc)
            return None
        if resp.status_code in (401, 404):  # the peer does not know the episode (restarted) or the protocol
            return "aborted"
        if resp.status_code != 200:
            log.warning("transaction %s: peer %s answered %d; asked again later", txn, peer.url, resp.status_code)
            return None
        try:
            return OutcomeResponse.model_validate_json(resp.content).outcome
        except ValueError:
            return None
