"""The serving class: owns the engine, the running episodes, the pool and the store.

Every public coroutine returns a result or raises `ApiError` (rendered by the app
as OpenAI's error envelope); the route handlers (`routes.py`) stay thin. All state is touched on the
event loop thread only; the engine generates in its own thread (futures) and
trains in a worker thread (`asyncio.to_thread`).

The serving class holds a `Trainer` (`trainer.py`) while the engine runs: its own loop, woken by
the pool, does the weight updates; `end` only stores the episode and adds it to the pool. Chat
calls generate through `GatedEngine`, the narrow `generate.Sampler` interface, whose gate the
trainer closes during an update.

States (`status().state`): OFFLINE (no engine; a client's job starts it) -> BOOTING (loading,
resuming) -> ROLLING (serving and collecting) <-> WEIGHT_SYNCING (an update runs; chat calls
wait) -> FINISHED once `train.total_steps` updates are done (still serving: episodes are
stored, no more updates); `stop` returns to OFFLINE.

Episode lifecycle (documented contract):

- `begin` returns a fresh episode with a random api key (`secrets.token_urlsafe`),
  one key per episode. It answers 503 while the engine is OFFLINE and 429 with
  Retry-After while it boots or updates (`SwarmClient.begin_episode` waits).
- Chat calls during WEIGHT_SYNCING wait for the update (up to
  `sync_wait_timeout`, then 429 + Retry-After); no running episode is dropped and
  the update's duration does not count as idle time.
- `end` writes the episode to SQLite before it returns. A repeated `end` with
  the same task_id and reward is idempotent (200, `"already_ended": true`), so a
  retried request is safe; a repeated end with a different task or reward is 409, and
  an end while one of the episode's LLM calls is still running is 409 (no turn is lost).
  A training episode that ended without any LLM call is stored, and its answer carries a `warning`.
- Episodes idle longer than their discard timeout are discarded and counted;
  later calls on them get 410 with the reason. Unknown ids/keys get 404/401.
- `end` and `abort` need the episode's own key or the admin token (checked by
  `vibe_rl.swarm.server.guard` for every other control route). An `end` of an episode this
  process does not know while the engine is not ROLLING answers 503/429 (it may be
  stored, and the store opens with the engine), so a client retries instead of failing.
- Bounds (ServerConfig): |reward| <= max_abs_reward, task_id length, metadata size,
  message count and discard timeout are checked before anything is stored or generated.
- Task groups that stay below grpo_n without a new episode for `incomplete_group_ttl`
  are discarded (marked `expired` in the store), counted and noted.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import Any, Literal

from vibe_rl.engine.choice import refusal as engine_refusal
from vibe_rl.rl.samples import Turn
from vibe_rl.schema import Task, TrainJob, WorkflowOutput
from vibe_rl.swarm.observe.winrate import win_of
from vibe_rl.swarm.protocol import (
    BeginEpisodeResponse,
    ChatCompletionRequest,
    EndEpisodeRequest,
    EngineStatus,
    StoppedStatus,
)
from vibe_rl.swarm.server import bounds, updates
from vibe_rl.swarm.server.config import ServerConfig
from vibe_rl.swarm.server.errors import ApiError
from vibe_rl.swarm.server.pool import CompletedEpisode, Pool, Tally
from vibe_rl.swarm.server.registry import Episode, EpisodeRegistry
from vibe_rl.swarm.server.static import StaticRouter
from vibe_rl.swarm.server.status import engine_status
from vibe_rl.swarm.server.trainer import EngineGate, GatedEngine, Trainer
from vibe_rl.swarm.server.txn import Transactions

log = logging.getLogger("vibe_rl.swarm")

OFFLINE, BOOTING, ROLLING, WEIGHT_SYNCING, FINISHED = "OFFLINE", "BOOTING", "ROLLING", "WEIGHT_SYNCING", "FINISHED"
STATES = (OFFLINE, BOOTING, ROLLING, WEIGHT_SYNCING, FINISHED)


class SwarmServing:
    def __init__(self, config: ServerConfig):
        self.config = config
        self.phase: Literal["OFFLINE", "BOOTING", "ROLLING"] = OFFLINE  # the engine's; `state` adds the trainer's
        self.job: TrainJob | None = None
        self.engine: Any = None
        self.sampler: GatedEngine | None = None  # the engine as chat calls see it (generate.Sampler)
        self.store: Any = None
        self.pool: Pool | None = None
        self.trainer: Trainer | None = None  # the weight-update loop, while an engine runs
        self.static: StaticRouter | None = None
        self.registry = EpisodeRegistry()  # running episodes by id and key; why gone ones went
        self.gate = EngineGate(self.registry)  # open while the engine rolls; a weight update closes it
        self.tally = Tally()  # discarded, aborted, expired episodes
        self._next_expire = 0.0
        self._ending: dict[str, tuple[str, float, str]] = {}  # episodes being written by end
        self.traces: deque[dict[str, Any]] = deque(maxlen=config.trace_buffer)
        self.errors: deque[str] = deque(maxlen=50)
        self.notes: list[str] = []
        self.sink: Any = None  # vibe_rl.swarm.observe.loggers.MetricsSink: per-update metrics to the job's loggers
        # cumulative since the server started, for rates (overwatch, vibe-rl run's progress line)
        self.counters = {"llm_calls": 0, "generated_tokens": 0, "episodes_ended": 0, "episodes_prepared": 0,
                         "peer_commits": 0, "peer_aborts": 0}
        self.txns = Transactions(self)  # two-phase ends of episodes on several servers (txn.py)
        self._tasks: set[asyncio.Task] = set()

    @property
    def state(self) -> str:
        """The documented state (module docstring): the engine's phase, refined by the trainer's."""
        if self.phase != ROLLING:
            return self.phase
        if not self.gate.is_open:
            return WEIGHT_SYNCING
        return FINISHED if self.trainer is not None and self.trainer.finished else ROLLING

    @property
    def accepting(self) -> bool:
        """Episodes may begin and chat calls generate (ROLLING or FINISHED)."""
        return self.phase == ROLLING and self.gate.is_open

    @property
    def global_step(self) -> int:
        return self.trainer.global_step if self.trainer is not None else 0

    # ------------------------------------------------------------ control

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def start(self, job: TrainJob | None) -> EngineStatus:
        job = job or self.config.base_job
        if job is None:
            raise ApiError(400, "No job given and the server has no --config job. Send a TrainJob, e.g. "
                                "SwarmClient(url).auto_sync_train_config_and_start_engine(TrainJob(...)).",
                           code="missing_job")
        effective, notes = self.config.effective_job(job)
        refused = engine_refusal(effective.model)  # before booting: the engine's own error would come later
        if refused:
            raise ApiError(400, refused, code="invalid_job", param="model.engine")
        if self.phase != OFFLINE:
            if effective == self.job:
                return self.status()
            raise ApiError(409, f"The engine already runs a different job (state {self.state}, model "
                                f"{self.job.model.path if self.job else '?'}). Stop it first (POST /control/stop, "
                                "SwarmClient.stop_engine()) or start another server on another port.",
                           code="engine_running")
        for note in notes:
            print(f"note: {note}", flush=True)
        self.notes = notes
        self.job, self.phase = effective, BOOTING
        self.gate.close()
        self._spawn(self._boot())
        return self.status()

    async def _boot(self) -> None:
        try:
            booted = await asyncio.to_thread(updates.boot, self.job)
        except Exception as exc:  # boot failures are reported through status, not lost
            log.exception("engine boot failed")
            self.errors.append(f"engine boot failed: {type(exc).__name__}: {exc}")
            self.phase = OFFLINE
            return
        self.engine, self.store, self.sink = booted.engine, booted.store, booted.sink
        self.sampler = GatedEngine(self.engine, self.gate)
        self.pool = Pool(self.job.train)
        for ep in booted.recovered:
            self.pool.add(ep)
        self.tally.discarded = int(self.store.get_meta("discarded_episodes", 0))
        self.tally.expired = int(self.store.get_meta("expired_episodes", 0))
        self.trainer = Trainer(engine=self.engine, pool=self.pool, store=self.store, job=self.job, config=self.config,
                               gate=self.gate, sink=self.sink, tally=self.tally, notes=self.notes, errors=self.errors,
                               step=booted.step)
        self.static = StaticRouter(self.job, lambda path: updates.load_frozen(path, self.job.model))
        self.traces.extend(self.store.recent_calls(self.config.trace_buffer))
        self.notes.extend(booted.notes + self.static.notes)
        for note in booted.notes + self.static.notes:
            print(f"note: {note}", flush=True)
        self.phase = ROLLING
        self.gate.open()
        self.trainer.start()  # a recovered pool may be ready already: the loop looks before it waits

    async def stop(self) -> StoppedStatus:
        if self.phase == BOOTING:
            raise ApiError(409, "The engine is still BOOTING; stop it once it is ROLLING.", code="engine_booting",
                           retry_after=2.0)
        if self.trainer is not None:
            await self.trainer.close()  # an update in progress finishes first
        running = len(self.registry)
        for ep in list(self.registry.running.values()):
            self.registry.forget(ep, "the engine was stopped while the episode ran")
        self.tally.aborted += running
        self.phase = OFFLINE
        self.gate.close()
        engine, store, static = self.engine, self.store, self.static
        self.engine = self.sampler = self.store = self.static = None
        self.pool = None
        if static is not None:
            await static.close()
        if engine is not None:
            await asyncio.to_thread(engine.close)
        if store is not None:
            store.close()
        if self.sink is not None:
            self.sink.close()
            self.sink = None
        status = StoppedStatus(**dict(self.status()), abandoned_running_episodes=running)
        self.job, self.trainer = None, None  # the next job's boot reads its own step
        return status

    async def shutdown(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await self.txns.close()
        if self.phase == BOOTING:  # the boot thread cannot be interrupted; the process exit ends it
            return
        if self.phase != OFFLINE or self.engine is not None:
            await self.stop()

    # ------------------------------------------------------------ status

    @property
    def model_name(self) -> str:
        return self.job.model.path if self.job else ""

    def status(self) -> EngineStatus:
        return engine_status(state=self.state, job=self.job, engine=self.engine, pool=self.pool, tally=self.tally,
                             incomplete_group_ttl=self.config.incomplete_group_ttl,
                             running=self.registry.running.values(), trainer=self.trainer, notes=self.notes,
                             errors=self.errors, counters=self.counters,
                             snapshots=self.static.snapshots if self.static is not None else None)

    def updates_view(self, since: int, limit: int = 1000) -> dict[str, Any]:
        """Per-update metrics with step > since (GET /control/updates?since=N); empty while OFFLINE."""
        rows = self.store.updates_since(since, max(1, min(limit, 10_000))) if self.store is not None else []
        return {"global_step": self.global_step, "updates": rows}

    def traces_view(self, limit: int) -> dict[str, Any]:
        limit = max(0, limit)
        return {"calls": list(self.traces)[-limit:] if limit else []}

    def models(self) -> dict[str, Any]:
        names = [self.model_name] if self.job else []
        names += [m.name for m in (self.job.static_models if self.job else [])]
        return {"object": "list", "data": [{"id": n, "object": "model", "created": 0, "owned_by": "vibe-rl"}
                                           for n in names]}

    # ------------------------------------------------------------ episodes

    def _not_ready(self, what: str) -> ApiError:
        if self.phase == OFFLINE:
            return ApiError(503, f"The engine is OFFLINE, so {what} cannot run. Start it first with "
                                 "SwarmClient(url).auto_sync_train_config_and_start_engine(job) (a restarted "
                                 "server stays OFFLINE until a client syncs its job again)"
                                 + (f" (last error: {self.errors[-1]})" if self.errors else "") + ".",
                            code="engine_offline")
        return ApiError(429, f"The engine is {self.state}; retry {what} shortly.", code="engine_busy",
                        retry_after=0.5)

    def begin(self, discard_timeout: float | None, base_url: str, kind: str = "train",
              group: str | None = None) -> BeginEpisodeResponse:
        bounds.check_discard_timeout(self.config, discard_timeout)
        bounds.check_group(self.config, group)
        if not self.accepting:
            raise self._not_ready("swarm.episode / begin_episode")
        bounds.check_running(self.config, len(self.registry))
        ep = self.registry.open(discard_timeout or self.config.default_discard_timeout, kind, group)
        return BeginEpisodeResponse(episode_uuid=ep.uuid, base_url=base_url, api_key=ep.api_key,
                                    model=self.model_name)

    async def end(self, req: EndEpisodeRequest, credential: str | None, admin: bool) -> dict[str, Any]:
        bounds.check_end(self.config, req)
        ep = self.registry.running.get(req.episode_uuid)
        if ep is None:
            if self.store is None and self.registry.gone.get(req.episode_uuid) is None:
                raise self._not_ready("ep.end / end_episode")  # maybe stored: the store opens with the engine
            self.registry.authorize(req.episode_uuid, self.registry.key_for(req.episode_uuid), credential, admin)
            stored = self.ended_status(req.episode_uuid)
            if stored is not None:
                _, reward, task_id = stored
                if task_id == req.task.task_id and reward == req.output.reward:
                    return {"episode_uuid": req.episode_uuid, "already_ended": True, "status": stored[0]}
                raise ApiError(409, f"Episode {req.episode_uuid} already ended with task_id={task_id!r} "
                                    f"reward={reward}; a second end with a different task or reward is refused.",
                               code="episode_already_ended", param="episode_uuid")
            self.registry.lookup(req.episode_uuid)  # raises 410 / 404
        self.registry.authorize(ep.uuid, ep.api_key, credential, admin)
        self.check_endable(ep, "ep.end / end_episode")
        if ep.prepared is not None:
            raise ApiError(409, f"Episode {ep.uuid} is prepared in transaction {ep.prepared.txn} (a two-phase end "
                                "of several servers' episodes): commit it (POST /episode/commit with that txn) or "
                                "abort it, instead of ending it alone.", code="episode_prepared", param="episode_uuid")
        return await self.store_end(ep, req.task, req.output)

    def ended_status(self, episode_uuid: str) -> tuple[str, float, str] | None:
        """(status, reward, task_id) of an episode stored (or being written) by an end, else None."""
        return self._ending.get(episode_uuid) or (self.store.episode_status(episode_uuid) if self.store else None)

    def check_endable(self, ep: Episode, what: str) -> None:
        """An end (or a prepare) needs the store open and no LLM call of the episode in flight."""
        if self.store is None:
            raise self._not_ready(what)
        if ep.inflight:
            raise ApiError(409, f"Episode {ep.uuid} still has {ep.inflight} LLM call(s) in flight (a call waits "
                                "during a weight update, and runs on after its client gave up); end it after they "
                                "return, so no turn is lost. SwarmClient retries this itself.", code="episode_busy",
                           param="episode_uuid", retry_after=0.5)

    async def store_end(self, ep: Episode, task: Task, output: WorkflowOutput) -> dict[str, Any]:
        """Store `ep` with its reward and pool it (an end, or the commit of a prepared episode); a failed write
        leaves it running, so the end can be retried."""
        # pooled under the group its begin named, else (AgentJet's swarm clients) under the task_id
        done = CompletedEpisode(ep.uuid, ep.group or task.task_id, output.reward, ep.turns, time.time())
        self.registry.forget(ep, "it already ended")
        self._ending[ep.uuid] = ("completed", done.reward, task.task_id)
        try:  # written before we answer; in a thread, so the event loop keeps serving meanwhile
            await asyncio.to_thread(self.store.save_episode, done, task.model_dump(mode="json"),
                                    output.metadata, "eval" if ep.kind == "eval" else "completed")
        except BaseException:  # not stored: the episode stays open, so the client can retry its end
            self.registry.reopen(ep)
            raise
        finally:
            self._ending.pop(ep.uuid, None)
        if self.static is not None:  # by-win-rate pools weigh each checkpoint by the learner's record against it
            self.static.snapshots.record(ep.snapshots, win_of(output.metadata))
        if ep.kind == "eval":
            if self.trainer is not None:
                self.trainer.record_eval(done.reward, win_of(output.metadata))
        elif self.pool is not None:
            self.pool.add(done)  # a group it completes wakes the trainer's loop
        self.counters["episodes_ended"] += 1
        result = {"episode_uuid": ep.uuid, "already_ended": False, "llm_calls": ep.llm_calls,
                  "trainable_turns": sum(1 for t in ep.turns if t.trainable)}
        if not ep.llm_calls and ep.kind != "eval":  # legitimate at times, but usually a client bug: say so
            result["warning"] = (f"Episode {ep.uuid} (task {done.task_id!r}) ended without any LLM call through its "
                                 "key, so nothing of it is trained. Call the model through the episode: ep.openai(), "
                                 "or openai.OpenAI(base_url=ep.base_url, api_key=ep.api_key) with model=ep.model.")
        return result

    async def abort(self, episode_uuid: str, credential: str | None, admin: bool) -> dict[str, Any]:
        self.registry.authorize(episode_uuid, self.registry.key_for(episode_uuid), credential, admin)
        ep = self.registry.lookup(episode_uuid)
        if ep.prepared is not None:  # it may not drop itself alone: it settles with its peers (txn.py)
            return await self.txns.abort_prepared(ep)
        self.registry.forget(ep, "it was aborted")
        self.tally.aborted += 1
        return {"episode_uuid": episode_uuid, "aborted": True, "llm_calls": ep.llm_calls}

    async def reap_forever(self) -> None:
        """Discard episodes idle past their timeout (never while an update pauses them)."""
        while True:
            await asyncio.sleep(self.config.reaper_interval)
            if not self.accepting:
                continue
            now = time.monotonic()
            if now >= self._next_expire and self.trainer is not None:
                self._next_expire = now + min(30.0, self.config.incomplete_group_ttl / 10)
                self.trainer.expire_groups(now)
            for ep in self.registry.idle(now):
                self.registry.forget(ep, f"discarded after {ep.timeout:g} s without an LLM call (raise the idle "
                                 "timeout: swarm.episode(task, timeout=...) / begin_episode(discard_episode_timeout=...))")
                self.tally.discarded += 1
                if self.store is not None:
                    self.store.set_meta("discarded_episodes", self.tally.discarded)
                log.warning("discarded idle episode %s (%d llm calls)", ep.uuid, ep.llm_calls)

    # ------------------------------------------------------------ chat

    async def wait_rolling(self) -> None:
        """Hold a chat call while the engine boots or updates (a new update may start right
        after one ends, so wait in a loop), then 429 + Retry-After after sync_wait_timeout."""
        deadline = time.monotonic() + self.config.sync_wait_timeout
        while not self.accepting:
            if self.phase == OFFLINE:
                raise self._not_ready("chat completions")
            try:
                await self.gate.wait_open(deadline - time.monotonic())
            except asyncio.TimeoutError:
                raise ApiError(429, f"The engine is still {self.state}; retry shortly.", code="engine_busy",
                               retry_after=2.0) from None

    async def chat(self, req: ChatCompletionRequest, api_key: str | None, player_header: str | None,
                   timing: dict[str, Any]) -> Any:
        from vibe_rl.swarm.server import generate

        ep = self.registry.for_key(api_key)
        bounds.check_messages(self.config, req)
        bounds.check_tool_calls(req)
        player = req.user or player_header
        if self.job is None:
            raise self._not_ready("chat completions")
        static = self.static.resolve(req.model) if self.static else None
        if static is None and req.model not in (self.model_name, self.model_name.rstrip("/").rsplit("/", 1)[-1]):
            names = [m["id"] for m in self.models()["data"]]
            raise ApiError(404, f"The model '{req.model}' does not exist on this server. Served models: {names}. "
                                f"Pass model={self.model_name!r} for the trainable model (ep.model, or the `model` "
                                "that /episode/begin returned); an opponent model must be a static_models entry of "
                                "the server's own --config (a synced job cannot add one).", code="model_not_found",
                           param="model")
        bounds.check_episode(self.config, ep, timing.get("request_bytes", 0))  # calls and stored bytes: 413
        result = None
        ep.last_activity = time.monotonic()
        ep.inflight += 1
        try:
            if static is not None:
                result = await self.static.complete(static, req, timing, ep.snapshots)
            else:
                await self.wait_rolling()
                result = await generate.generate_on(self.sampler, req, self.job.rollout, self.model_name, timing,
                                                    prefixes=ep.prefixes)
        finally:
            if result is None or result.finished is None:
                self.record_call(ep, req.model, player, static is not None, result.turns if result else None)
        if result.finished is not None:  # a stream: the call (and its turns) end when generation ends
            result.finished.add_done_callback(
                lambda _f: self.record_call(ep, req.model, player, static is not None, result.turns))
        return result.body

    def record_call(self, ep: Episode, model: str, player: str | None, static: bool,
                    turns: list[Turn] | None) -> None:
        """A call of `ep` has ended: its turns (None: it failed) join the episode."""
        ep.inflight -= 1
        ep.last_activity = time.monotonic()
        if turns is None:
            return
        ep.llm_calls += 1
        self.counters["llm_calls"] += 1
        self.counters["generated_tokens"] += sum(len(t.response_ids) for t in turns if not t.static)
        now = time.time()
        for turn in turns:
            turn.player, turn.ts = player, now
            ep.turns.append(turn)
        self.traces.append({"episode_uuid": ep.uuid, "player": player, "model": model, "static": static, "ts": now})
