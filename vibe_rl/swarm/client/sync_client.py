"""The light Python client of a swarm server (no torch, no uvicorn).

    swarm = SwarmClient("http://127.0.0.1:10086")
    swarm.auto_sync_train_config_and_start_engine(TrainJob.from_yaml("job.yaml"))
    with swarm.episode(task, timeout=240) as ep:     # aborted if the block raises
        reply = ep.openai().chat.completions.create(model=ep.model, messages=..., user="spy:player_3")
        ep.end(1.0, {"winner": "civilian"})

`begin_episode` / `end_episode` / `abort_episode` are the same steps one by one (`prepare_episode` /
`commit_episode`: the two phases of ending one game's episodes on several servers, `client/twophase.py`);
`episodes` (this room) has the multi-server variant, `groups` the GRPO groups and the loop over them
(`play_groups`), `routing` the role -> model routing, `inflight` run_in_flight, and `async_client` the same
client for asyncio code (it shares `_Transport`, the request/retry/auth logic).

Waiting and retries:
- `begin_episode` waits (honouring Retry-After) while the engine boots or runs a
  weight update; it fails at once, with the server's explanation, when the engine
  is OFFLINE (call `auto_sync_train_config_and_start_engine` first).
- Chat calls need no client logic: during an update the server holds them until
  the new weights are live; if it ever answers 429 the openai SDK honours Retry-After.
- `end_episode` is idempotent: repeating it with the same task_id and reward
  returns `{"already_ended": true}`, so it is retried on connection errors; a
  repeat with a different task or reward is refused (409 -> SwarmError). A
  training episode that made no LLM call comes back with a `warning`, logged here.

Credentials: control calls and `begin_episode` send the server's admin token
(`token=`, else `VIBE_RL_SWARM_TOKEN`, `VIBE_RL_SWARM_TOKEN_FILE`, or the token the
server registered for a loopback port; see `vibe_rl.swarm.auth`); `end_episode` and
`abort_episode` send the episode's own key (and the admin token, which also works
after a server restart).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Generator, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx

from vibe_rl.config import unknown_keys
from vibe_rl.errors import ConfigError, SwarmError
from vibe_rl.schema import OpenaiBaseUrlAndApiKey, Task, TrainJob, WorkflowOutput
from vibe_rl.swarm.auth import client_token
from vibe_rl.swarm.client.episodes import Episode, open_episode
from vibe_rl.swarm.client.groups import Group, schedule_groups
from vibe_rl.swarm.client.outputs import as_json
from vibe_rl.swarm.protocol import EngineStatus, Update

log = logging.getLogger("vibe_rl.swarm.client")


class SwarmHTTPError(SwarmError):
    """A swarm server answered with an error; `status` and `code` come from its envelope."""

    def __init__(self, message: str, status: int, code: str | None):
        super().__init__(message)
        self.status, self.code = status, code


def _retry_after(resp: httpx.Response, default: float = 1.0) -> float:
    ms = resp.headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    try:
        return float(resp.headers.get("retry-after", default))
    except ValueError:
        return default


class _Transport:
    """What SwarmClient and AsyncSwarmClient share: the admin token, the episodes' keys, the headers, and the
    request/retry/auth decisions of one call (`_exchange`, driven by a sync or an async loop)."""

    def __init__(self, url: str, wait_timeout: float, token: str | None):
        self.url = url.rstrip("/")
        self._explicit_token = token
        self.token = client_token(self.url, token)  # the admin token (None: none found)
        self._episode_keys: dict[str, str] = {}  # episode_uuid -> its key, until end/abort
        self.wait_timeout = wait_timeout
        # The job the server runs, set by auto_sync_train_config_and_start_engine: the synced job after the
        # server's --model/--set overrides (e.g. small batches on a CPU run). Size rollout loops by it.
        self.job: TrainJob | None = None

    def _headers(self, episode_uuid: str | None = None) -> dict[str, str]:
        headers = {"x-vibe-rl-token": self.token} if self.token else {}
        key = self._episode_keys.get(episode_uuid) if episode_uuid else None
        if key or self.token:
            headers["Authorization"] = f"Bearer {key or self.token}"
        return headers

    def _exchange(self, method: str, path: str, wait_busy: bool = False, transport_retries: int = 3,
                  episode_uuid: str | None = None) -> Generator[tuple[str, Any], Any, Any]:
        """One call as steps, without I/O: yields ("request", headers), to be sent the httpx.Response or the
        httpx.TransportError it got, and ("sleep", seconds), to be sent None; returns the answer's JSON."""
        deadline = time.monotonic() + self.wait_timeout
        attempt = 0
        while True:
            outcome = yield "request", self._headers(episode_uuid)
            if isinstance(outcome, httpx.TransportError):
                attempt += 1
                if attempt > transport_retries:
                    raise SwarmError(f"Cannot reach the swarm server at {self.url} ({type(outcome).__name__}: "
                                     f"{outcome}). Is `vibe-rl swarm start` running on that port?") from outcome
                yield "sleep", min(5.0, 0.25 * 2 ** attempt)
                continue
            resp: httpx.Response = outcome
            if resp.status_code == 401 and self._explicit_token is None and attempt <= transport_retries:
                fresh = client_token(self.url)  # a restarted server may have a new token
                if fresh and fresh != self.token:
                    self.token, attempt = fresh, attempt + 1
                    continue
            if wait_busy and time.monotonic() < deadline and (resp.status_code == 429 or (
                    resp.status_code == 409 and resp.headers.get("retry-after"))):  # 409 episode_busy: calls run
                yield "sleep", min(_retry_after(resp), max(0.0, deadline - time.monotonic()))
                continue
            if resp.status_code >= 400:
                try:
                    err = resp.json().get("error", {})
                except ValueError:
                    err = {"message": resp.text[:500]}
                raise SwarmHTTPError(f"{method} {path} failed ({resp.status_code}): {err.get('message')}",
                                     resp.status_code, err.get("code"))
            return resp.json()

    # the bodies and bookkeeping of the calls, the same for both clients

    @staticmethod
    def _job_body(job: TrainJob | dict | str | Path) -> TrainJob:
        if isinstance(job, dict):
            unknown = unknown_keys(TrainJob, job)
            if unknown:  # TrainJob.model_validate would drop them, and their defaults would train
                raise ConfigError(f"Unknown TrainJob fields: {', '.join(unknown[:10])}. Check their spelling against "
                                  "the job reference (docs/client.md, 'The job').")
            return TrainJob.model_validate(job)
        return job if isinstance(job, TrainJob) else TrainJob.from_yaml(job)

    def _started(self, job: TrainJob, status: dict[str, Any], verbose: bool) -> None:
        for note in status.get("notes", []):
            if verbose:
                print(f"[swarm {self.url}] note: {note}", file=sys.stderr)
        self.job = TrainJob.model_validate(status["job"]) if status.get("job") else job

    def _rolling(self, status: dict[str, Any], deadline: float, shown: str | None, verbose: bool) -> bool:
        """True once the engine rolls; raises when it is OFFLINE or the deadline passed."""
        if status["state"] in ("ROLLING", "WEIGHT_SYNCING", "FINISHED"):
            return True
        if status["state"] == "OFFLINE":
            why = status["errors"][-1] if status.get("errors") else "the engine is OFFLINE"
            raise SwarmError(f"The swarm engine at {self.url} did not start: {why}")
        if verbose and shown != status["state"]:
            print(f"[swarm {self.url}] engine {status['state']} ...", file=sys.stderr)
        if time.monotonic() > deadline:
            raise SwarmError(f"The swarm engine at {self.url} is still {status['state']} after waiting.")
        return False

    @staticmethod
    def _checked_task(task: Task | dict) -> Task:
        if not isinstance(task, Task):
            task = Task.model_validate(task)  # before the episode begins: a bad task must not leave one open
        as_json(task, "the task")  # metadata without a JSON form would fail only at end, after the game
        return task

    @staticmethod
    def _begin_body(discard_episode_timeout: float | None, kind: str, group: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"discard_episode_timeout": discard_episode_timeout}
        if kind != "train":
            body["kind"] = kind
        if group is not None:  # left out, the server groups by the task_id the end sends
            body["group"] = group
        return body

    # groups: values built from the job the server runs

    def group(self, task: Task | dict, n: int | None = None, key: str | None = None, eval: bool = False) -> Group:
        """The GRPO group of `n` plays of `task` (default: the job's grpo_n; an eval group: 1), pooled under
        `key` (default: its task_id). Play it with `play_groups`, or `episode(group.task, group=group.key)`."""
        if n is None:
            n = 1 if eval else self._job("swarm.group(task)").grpo_n
        return Group.of(task, n, key=key, eval=eval)

    def _job(self, what: str) -> TrainJob:
        if self.job is None:
            raise ConfigError(f"{what} sizes groups by the job the server runs: call "
                              "swarm.auto_sync_train_config_and_start_engine(job) first, or pass n=.")
        return self.job


    def _begun(self, data: dict[str, Any]) -> tuple[str, OpenaiBaseUrlAndApiKey]:
        self._episode_keys[data["episode_uuid"]] = data["api_key"]
        while len(self._episode_keys) > 100_000:  # begun but never ended: forget the oldest
            self._episode_keys.pop(next(iter(self._episode_keys)))
        return data["episode_uuid"], OpenaiBaseUrlAndApiKey(base_url=data["base_url"], api_key=data["api_key"],
                                                            model=data["model"])

    @staticmethod
    def _end_body(task: Task | dict, episode_uuid: str, workflow_output: WorkflowOutput | dict) -> dict[str, Any]:
        if not isinstance(task, Task):
            task = Task.model_validate(task)
        if not isinstance(workflow_output, WorkflowOutput):  # a dict's keys beside reward/metadata join the metadata
            workflow_output = WorkflowOutput.model_validate(workflow_output)
        return {"episode_uuid": episode_uuid, "task": as_json(task, "the task"),
                "output": as_json(workflow_output, "ep.end's metadata")}

    @classmethod
    def _prepare_body(cls, task: Task, episode_uuid: str, workflow_output: WorkflowOutput, txn: str,
                      peers: Sequence[dict[str, str]]) -> dict[str, Any]:
        """`POST /episode/prepare`'s body (`PrepareEpisodeRequest`): an end's body, the txn and every peer."""
        return {**cls._end_body(task, episode_uuid, workflow_output), "txn": txn, "peers": list(peers)}

    @staticmethod
    def _commit_body(episode_uuid: str, txn: str) -> dict[str, Any]:
        """`POST /episode/commit`'s body (`TxnEpisodeRequest`)."""
        return {"episode_uuid": episode_uuid, "txn": txn}

    def _ended(self, episode_uuid: str, result: dict[str, Any]) -> dict[str, Any]:
        self._episode_keys.pop(episode_uuid, None)
        if result.get("warning"):  # e.g. no LLM call went through the episode's key: nothing of it is trained
            log.warning("%s", result["warning"])
        return result


class SwarmClient(_Transport):
    """Client of one swarm server (one trainable model). Thread-safe: share it between workers."""

    def __init__(self, url: str, timeout: float = 600.0, wait_timeout: float = 3600.0, max_connections: int = 256,
                 token: str | None = None):
        super().__init__(url, wait_timeout, token)
        self._http = httpx.Client(base_url=self.url, timeout=httpx.Timeout(timeout, connect=10.0),
                                  limits=httpx.Limits(max_connections=max_connections,
                                                      max_keepalive_connections=max_connections))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SwarmClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ transport

    def _call(self, method: str, path: str, body: Any = None, wait_busy: bool = False,
              transport_retries: int = 3, episode_uuid: str | None = None) -> Any:
        steps = self._exchange(method, path, wait_busy, transport_retries, episode_uuid)
        try:
            kind, arg = next(steps)
            while True:
                if kind == "sleep":
                    time.sleep(arg)
                    kind, arg = steps.send(None)
                    continue
                try:
                    outcome: Any = self._http.request(method, path, json=body, headers=arg)
                except httpx.TransportError as exc:
                    outcome = exc
                kind, arg = steps.send(outcome)
        except StopIteration as done:
            return done.value

    # ------------------------------------------------------------ control

    def auto_sync_train_config_and_start_engine(self, job: TrainJob | dict | str | Path, wait: bool = True,
                                                verbose: bool = True) -> dict[str, Any]:
        """Send the job (a TrainJob, a dict checked field by field, or a YAML path) and start the engine; wait
        until ROLLING. The server's --model/--set win: `self.job` is set to the job it actually runs."""
        job = self._job_body(job)
        status = self._call("POST", "/control/start", job.model_dump(mode="json"))
        self._started(job, status, verbose)
        return self.wait_until_rolling(verbose=verbose) if wait else status

    def wait_until_rolling(self, timeout: float | None = None, verbose: bool = False) -> dict[str, Any]:
        deadline = time.monotonic() + (timeout or self.wait_timeout)
        shown = None
        while not self._rolling(status := self.get_engine_status(), deadline, shown, verbose):
            shown = status["state"]
            time.sleep(0.2)
        return status

    def status(self) -> EngineStatus:
        """The server's state, pool, running episodes and job, typed (`get_engine_status()`: the raw JSON)."""
        return EngineStatus.model_validate(self.get_engine_status())

    def get_engine_status(self) -> dict[str, Any]:
        return self._call("GET", "/control/status")

    def get_traces(self, limit: int = 200) -> dict[str, Any]:
        return self._call("GET", f"/control/traces?limit={int(limit)}")

    def updates(self, since: int = 0) -> list[Update]:
        """The weight updates after global step `since`, oldest first (integer steps)."""
        data = self._call("GET", f"/control/updates?since={int(since)}")
        return [Update.model_validate(row) for row in data["updates"]]

    def stop_engine(self) -> dict[str, Any]:
        return self._call("POST", "/control/stop")

    # ------------------------------------------------------------ episodes

    def groups(self, tasks: Sequence[Task], held_out: Sequence[Task] = (), eval_every: int = 0) -> Iterator[Group]:
        """Endless groups of the job's grpo_n plays over `tasks`; with `held_out` and eval_every K > 0, eval groups of
        each held-out task at the start and every K weight updates (see `schedule_groups`)."""
        return schedule_groups(tasks, self._job("swarm.groups(tasks)").grpo_n, held_out, eval_every,
                               step=lambda: self.status().global_step)

    def episode(self, task: Task, timeout: float | None = None, eval: bool = False,
                group: str | None = None) -> AbstractContextManager[Episode]:
        """`with swarm.episode(task) as ep:` an open Episode (ep.base_url, ep.api_key, ep.model, ep.openai());
        end it with `ep.end(reward, metadata)`; an exception in the block aborts it. `timeout`: seconds
        without an LLM call after which the server discards it. `eval=True`, `group`: see `begin`."""
        return open_episode(self, task, timeout=timeout, eval=eval, group=group)

    def begin(self, task: Task, timeout: float | None = None, eval: bool = False,
              group: str | None = None) -> Episode:
        """Begin an episode of `task` (the context manager `episode` is usually nicer). An eval episode is
        served by the current weights and its reward is logged as eval/*, but it is never trained on; end it with
        metadata {"win": True/False} (the trainable side won) to log the eval win rate with a 95% interval.
        `group`: the GRPO group key it is pooled under (default: the task's task_id)."""
        task = self._checked_task(task)
        kind = "eval" if eval else "train"
        uuid, creds = self.begin_episode(timeout, kind=kind, group=group)
        return Episode(self, uuid, creds, task, kind=kind, group=group)

    def begin_episode(self, discard_episode_timeout: float | None = None, kind: str = "train",
                      group: str | None = None) -> tuple[str, OpenaiBaseUrlAndApiKey]:
        """A new episode and its OpenAI credentials; waits while the engine boots or updates."""
        body = self._begin_body(discard_episode_timeout, kind, group)
        return self._begun(self._call("POST", "/episode/begin", body, wait_busy=True))

    def end_episode(self, task: Task, episode_uuid: str, workflow_output: WorkflowOutput) -> dict[str, Any]:
        """Report the reward; the server stores the episode before answering. Idempotent (see module doc)."""
        body = self._end_body(task, episode_uuid, workflow_output)
        return self._ended(episode_uuid, self._call("POST", "/episode/end", body, wait_busy=True,
                                                    episode_uuid=episode_uuid))

    def abort_episode(self, episode_uuid: str) -> dict[str, Any]:
        result = self._call("POST", "/episode/abort", {"episode_uuid": episode_uuid}, episode_uuid=episode_uuid)
        self._episode_keys.pop(episode_uuid, None)
        return result

    def prepare_episode(self, task: Task, episode_uuid: str, workflow_output: WorkflowOutput, txn: str,
                        peers: Sequence[dict[str, str]]) -> dict[str, Any]:
        """The first phase of a multi-server end (`POST /episode/prepare`; `eps.end` sends it): the server holds the
        reward and closes the episode to calls. `peers`: every episode of the transaction as {url, episode_uuid,
        api_key}. Idempotent for the same txn and reward (retried on connection errors)."""
        body = self._prepare_body(task, episode_uuid, workflow_output, txn, peers)
        return self._call("POST", "/episode/prepare", body, wait_busy=True, episode_uuid=episode_uuid)

    def commit_episode(self, episode_uuid: str, txn: str) -> dict[str, Any]:
        """The second phase (`POST /episode/commit`): the prepared episode is stored and pooled, as an end; the
        `EndEpisodeResponse` fields as a dict. Idempotent (a repeat, or one the server settled: already_ended)."""
        body = self._commit_body(episode_uuid, txn)
        return self._ended(episode_uuid, self._call("POST", "/episode/commit", body, wait_busy=True,
                                                    episode_uuid=episode_uuid))
