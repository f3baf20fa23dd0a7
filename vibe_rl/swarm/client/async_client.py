"""The asyncio client of a swarm server: SwarmClient's calls as coroutines, over httpx.AsyncClient.

    async with AsyncSwarmClient("http://127.0.0.1:10086") as swarm:
        async with swarm.episode(task, timeout=240) as ep:       # aborted if the block raises or is cancelled
            llm = ep.openai()                                    # an openai.AsyncOpenAI for the episode
            reply = await llm.chat.completions.create(model=ep.model, messages=..., user="spy:player_3")
            await ep.end(1.0, {"winner": "civilian"})

Requests, credentials, retries and waiting are SwarmClient's (`vibe_rl.swarm.client.sync_client._Transport` makes the
decisions; this module only awaits them).

Cancellation: a begin cancelled by asyncio (`asyncio.wait_for`, `asyncio.timeout`, a cancelled task) never
leaves an open episode on the server. Cancelled before its request went out (or while it waits out a 429), it
sends nothing more; cancelled while the request is on the wire, the request is left to finish in the
background and the episode it opened is aborted. An episode block left by a cancellation aborts its episode
(the abort runs to its end even when cancelled again). `aclose()` (the end of `async with AsyncSwarmClient`)
waits for these background calls before it closes the connections.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from vibe_rl.errors import SwarmError
from vibe_rl.schema import OpenaiBaseUrlAndApiKey, Task, TrainJob, WorkflowOutput
from vibe_rl.swarm.client.episodes import EpisodeCredentials, NotAnEpisodeError, log_aborted, log_failed_abort
from vibe_rl.swarm.client.outputs import end_output
from vibe_rl.swarm.client.sync_client import _Transport
from vibe_rl.swarm.protocol import EngineStatus, Update

if TYPE_CHECKING:
    from vibe_rl.swarm.protocol import EndEpisodeResponse

log = logging.getLogger("vibe_rl.swarm.async_client")


class _Sending:
    """Whether a call's request is on the wire (then cancelling it could lose what the server did)."""

    now = False


class AsyncSwarmClient(_Transport):
    """Client of one swarm server for asyncio code. Share one per event loop; use it as `async with`."""

    def __init__(self, url: str, timeout: float = 600.0, wait_timeout: float = 3600.0, max_connections: int = 256,
                 token: str | None = None):
        super().__init__(url, wait_timeout, token)
        self._http = httpx.AsyncClient(base_url=self.url, timeout=httpx.Timeout(timeout, connect=10.0),
                                       limits=httpx.Limits(max_connections=max_connections,
                                                           max_keepalive_connections=max_connections))
        self._background: set[asyncio.Task] = set()
        self.late_aborts = 0  # episodes opened by a begin that was cancelled on the wire, then aborted here

    async def __aenter__(self) -> AsyncSwarmClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Wait for the background calls (late aborts), then close the connections."""
        await self.drain()
        await self._http.aclose()

    async def drain(self) -> None:
        """Wait until no background call (a begin cancelled on the wire, its abort, an abort) is left."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)
            await asyncio.sleep(0)  # done-callbacks may have started an abort

    def _spawn(self, coro: Any) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    # ------------------------------------------------------------ transport

    async def _call(self, method: str, path: str, body: Any = None, wait_busy: bool = False,
                    transport_retries: int = 3, episode_uuid: str | None = None,
                    sending: _Sending | None = None) -> Any:
        steps = self._exchange(method, path, wait_busy, transport_retries, episode_uuid)
        sending = sending or _Sending()
        try:
            kind, arg = next(steps)
            while True:
                if kind == "sleep":
                    await asyncio.sleep(arg)
                    kind, arg = steps.send(None)
                    continue
                sending.now = True
                try:
                    outcome: Any = await self._http.request(method, path, json=body, headers=arg)
                except httpx.TransportError as exc:
                    outcome = exc
                finally:
                    sending.now = False
                kind, arg = steps.send(outcome)
        except StopIteration as done:
            return done.value

    # ------------------------------------------------------------ control

    async def auto_sync_train_config_and_start_engine(self, job: TrainJob | dict | str | Path, wait: bool = True,
                                                      verbose: bool = True) -> dict[str, Any]:
        """SwarmClient's: send the job, start the engine, wait until ROLLING; `self.job` is the job it runs."""
        job = self._job_body(job)
        status = await self._call("POST", "/control/start", job.model_dump(mode="json"))
        self._started(job, status, verbose)
        return await self.wait_until_rolling(verbose=verbose) if wait else status

    async def wait_until_rolling(self, timeout: float | None = None, verbose: bool = False) -> dict[str, Any]:
        deadline = time.monotonic() + (timeout or self.wait_timeout)  # the clock _Transport._rolling reads
        shown = None
        while not self._rolling(status := await self.get_engine_status(), deadline, shown, verbose):
            shown = status["state"]
            await asyncio.sleep(0.2)
        return status

    async def status(self) -> EngineStatus:
        return EngineStatus.model_validate(await self.get_engine_status())

    async def get_engine_status(self) -> dict[str, Any]:
        return await self._call("GET", "/control/status")

    async def updates(self, since: int = 0) -> list[Update]:
        data = await self._call("GET", f"/control/updates?since={int(since)}")
        return [Update.model_validate(row) for row in data["updates"]]

    async def stop_engine(self) -> dict[str, Any]:
        return await self._call("POST", "/control/stop")

    # ------------------------------------------------------------ episodes

    def episode(self, task: Task | dict, timeout: float | None = None, eval: bool = False,
                group: str | None = None) -> AsyncEpisodeBlock:
        """`async with swarm.episode(task) as ep:` an open AsyncEpisode; `await ep.end(reward, metadata)` ends it,
        an exception (or a cancellation) in the block aborts it, leaving without `end` aborts it and raises.
        `group`: the GRPO group key (default: the task_id), e.g. `group=g.key` of `g = swarm.group(task)`."""
        return AsyncEpisodeBlock(self, task, timeout, eval, group)

    async def begin(self, task: Task | dict, timeout: float | None = None, eval: bool = False,
                    group: str | None = None) -> AsyncEpisode:
        """Begin an episode you end (`await ep.end(...)`) or abort (`await ep.abort()`) yourself."""
        task = self._checked_task(task)
        kind = "eval" if eval else "train"
        uuid, creds = await self.begin_episode(timeout, kind=kind, group=group)
        return AsyncEpisode(self, uuid, creds, task, kind=kind, group=group)

    async def begin_episode(self, discard_episode_timeout: float | None = None, kind: str = "train",
                            group: str | None = None) -> tuple[str, OpenaiBaseUrlAndApiKey]:
        """`POST /episode/begin` (waits while the engine boots or updates), safe to cancel (module doc)."""
        sending = _Sending()
        body = self._begin_body(discard_episode_timeout, kind, group)

        async def begin() -> tuple[str, OpenaiBaseUrlAndApiKey]:
            return self._begun(await self._call("POST", "/episode/begin", body, wait_busy=True, sending=sending))

        call = self._spawn(begin())
        try:
            return await asyncio.shield(call)
        except asyncio.CancelledError:
            if not sending.now and not call.done():
                call.cancel()  # nothing is on the wire: nothing was opened, nothing will be
            call.add_done_callback(self._abort_if_begun)
            raise

    def _abort_if_begun(self, call: asyncio.Task) -> None:
        if call.cancelled() or call.exception() is not None:
            return
        uuid, _ = call.result()
        self._spawn(self._abort_quietly(uuid, late=True))

    async def _abort_quietly(self, uuid: str, late: bool = False) -> None:
        try:
            result = await self.abort_episode(uuid)
        except Exception as exc:  # noqa: BLE001 (a background call: its failure is logged, never lost in a task)
            log_failed_abort(uuid, exc)
            return
        log_aborted(uuid, result)
        if late:
            self.late_aborts += 1
            log.debug("aborted episode %s, opened by a begin that was cancelled", uuid)

    async def end_episode(self, task: Task | dict, episode_uuid: str,
                          workflow_output: WorkflowOutput | dict) -> dict[str, Any]:
        body = self._end_body(task, episode_uuid, workflow_output)
        return self._ended(episode_uuid, await self._call("POST", "/episode/end", body, wait_busy=True,
                                                          episode_uuid=episode_uuid))

    async def abort_episode(self, episode_uuid: str) -> dict[str, Any]:
        result = await self._call("POST", "/episode/abort", {"episode_uuid": episode_uuid},
                                  episode_uuid=episode_uuid)
        self._episode_keys.pop(episode_uuid, None)
        return result

    async def prepare_episode(self, task: Task, episode_uuid: str, workflow_output: WorkflowOutput, txn: str,
                              peers: Sequence[dict[str, str]]) -> dict[str, Any]:
        """SwarmClient's first phase of a multi-server end (`POST /episode/prepare`; `await eps.end` of
        `open_async_episodes` sends it). A cancelled prepare may or may not have reached the server: abort the
        episode (as `eps.end` does), and the server settles it with its peers."""
        body = self._prepare_body(task, episode_uuid, workflow_output, txn, peers)
        return await self._call("POST", "/episode/prepare", body, wait_busy=True, episode_uuid=episode_uuid)

    async def commit_episode(self, episode_uuid: str, txn: str) -> dict[str, Any]:
        """SwarmClient's second phase (`POST /episode/commit`): stored and pooled, as an end (a dict of
        `EndEpisodeResponse`'s fields). A commit that never arrives is made by the server itself (twophase.py)."""
        body = self._commit_body(episode_uuid, txn)
        return self._ended(episode_uuid, await self._call("POST", "/episode/commit", body, wait_busy=True,
                                                          episode_uuid=episode_uuid))


class AsyncEpisode(EpisodeCredentials):
    """One open episode: `base_url`, `api_key`, `model` (`credentials`), then `await end(reward)` or `abort()`;
    `openai()` is an `openai.AsyncOpenAI`, closed when the episode ends."""

    OPENAI_CLASS = "AsyncOpenAI"
    client: AsyncSwarmClient

    async def end(self, reward: float | WorkflowOutput, metadata: dict[str, Any] | None = None) -> EndEpisodeResponse:
        """Report the reward, as `Episode.end` does; the server stores the episode before answering."""
        from vibe_rl.swarm.protocol import EndEpisodeResponse

        output = end_output(reward, metadata)
        result = EndEpisodeResponse.model_validate(await self.client.end_episode(self.task, self.uuid, output))
        self.closed = True
        await self._release()
        return result

    async def abort(self) -> None:
        """Drop the episode; runs to its end even when cancelled (a failure is only logged, as `Episode.abort`)."""
        if self.closed:
            return
        self.closed = True
        try:
            await asyncio.shield(self.client._spawn(self.client._abort_quietly(self.uuid)))
        finally:
            await self._release()

    async def _release(self) -> None:
        if self._openai is not None:
            client, self._openai = self._openai, None
            await client.close()


class AsyncBlock:
    """An `async with` block that begins nothing before it is entered: used as the episode itself, or with a
    plain `with`, it raises NotAnEpisodeError saying how to write it (`open_async_episodes` is one too)."""

    WHAT = "swarm.episode(task) of an AsyncSwarmClient"
    WRITE = "`async with swarm.episode(task) as ep:` ... `await ep.end(reward)`, or `ep = await swarm.begin(task)`"

    def _misuse(self, what: str) -> NotAnEpisodeError:
        return NotAnEpisodeError(f"{self.WHAT} is an async context manager, not the episode ({what}); nothing has "
                                 f"begun. Write {self.WRITE}.")

    def __enter__(self) -> Any:
        raise self._misuse("used with `with`")

    def __exit__(self, *exc: Any) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        raise self._misuse(f"asked for .{name}")

    def __getitem__(self, key: Any) -> Any:
        raise self._misuse(f"asked for [{key!r}]")


class AsyncEpisodeBlock(AsyncBlock):
    """What `AsyncSwarmClient.episode` returns: `async with` it; nothing begins before that."""

    def __init__(self, client: AsyncSwarmClient, task: Task | dict, timeout: float | None, eval: bool,
                 group: str | None = None):
        self._client, self._task, self._timeout, self._eval, self._group = client, task, timeout, eval, group
        self._ep: AsyncEpisode | None = None

    async def __aenter__(self) -> AsyncEpisode:
        self._ep = await self._client.begin(self._task, timeout=self._timeout, eval=self._eval, group=self._group)
        return self._ep

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        ep = self._ep
        if ep is None or ep.closed:
            return
        await ep.abort()
        if exc_type is None:
            raise SwarmError(f"An episode left the `async with` block without end(reward) (task {ep.task.task_id}); "
                             "it was aborted. Call `await ep.end(reward)` (or `await ep.abort()`) inside the block.")
