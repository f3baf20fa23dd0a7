"""The Trainer: the server's weight-update loop, held by the serving class (one per running engine).

It runs as its own asyncio task, woken by the pool (`Pool.filled`) whenever an ended episode
leaves it ready; an HTTP handler only adds the episode. One update, top to bottom:

1. close the engine gate and wait until the calls already inside the engine have finished on
   the old weights (`EngineGate`; new calls wait, up to `sync_wait_timeout`);
2. take whole task groups from the pool (`non_dummy_tasks`: groups with equal rewards are
   marked `skipped`);
3. build the batch (`updates.build_batch`): a group that cannot be trained on (reward out of
   range, broken turns) is marked `failed` alone, the others still train;
4. one optimiser step in a worker thread (`updates.train_step`); a failed step puts its groups
   back in the pool, and only after 3 failures in a row are they marked `failed` (so a broken
   engine cannot loop forever);
5. count the step and mark the episodes `trained`, then checkpoint every `save_freq` steps:
   a failed save is reported with its path, `global_step` still matches the weights, and the
   episodes trained since the latest checkpoint are retrained after a restart (`Store.untrained`);
6. metrics (eval rewards and win rate since the last update, throughput) go to the job's loggers
   (`MetricsSink`) and the store's update records; then the gate reopens.

After `train.total_steps` updates the loop ends (`finished`); episodes are still served and stored.
Incomplete task groups older than `incomplete_group_ttl` are discarded, counted and noted
(`expire_groups`, called by the serving class's reaper).

The gate (`EngineGate`) is the sync half of an update: `close()` stops new calls from passing
`wait_open` (they wait, up to `sync_wait_timeout`, then get 429 + Retry-After from the serving
class), `drained()` waits until every request already inside the engine has finished on the old
weights, `reopen()` lets the waiting calls through, and the pause is not idle time, so every running
episode's idle clock starts again then. Chat calls reach the trainable engine as `GatedEngine` (a
`generate.Sampler`), which counts each submitted request in the gate until the engine has answered
it; the engine's thread counts an answer under a lock and wakes the event loop only for a drain
that waits on it (a wake-up per answer cost ~20% of the episode rate at 32 clients on 2 cores).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from vibe_rl.schema import TrainJob
from vibe_rl.swarm.observe.winrate import eval_metrics
from vibe_rl.swarm.server import updates
from vibe_rl.swarm.server.config import ServerConfig
from vibe_rl.swarm.server.pool import Pool, Tally
from vibe_rl.swarm.server.registry import EpisodeRegistry

log = logging.getLogger("vibe_rl.swarm")


class EngineGate:
    """Open while the engine rolls; closed by a weight update, which first drains the engine."""

    def __init__(self, registry: EpisodeRegistry):
        self.registry = registry  # running episodes: the pause does not count as their idle time
        self.inflight = 0  # requests submitted to the engine and not yet answered (under _lock)
        self._lock = threading.Lock()  # the engine's thread counts answers; no event-loop wake-up per answer
        self._waiter: asyncio.Future | None = None  # drained() waits on it while requests remain
        self._open = asyncio.Event()

    @property
    def is_open(self) -> bool:
        return self._open.is_set()

    def open(self) -> None:
        self._open.set()

    async def wait_open(self, timeout: float) -> None:
        """Wait until the gate opens; asyncio.TimeoutError after `timeout` seconds."""
        await asyncio.wait_for(self._open.wait(), timeout=max(0.0, timeout))

    def close(self) -> None:
        """No call passes `wait_open` until `open` or `reopen` (an update starts, or the engine stops)."""
        self._open.clear()

    async def drained(self) -> None:
        """Every request already inside the engine has finished (on the old weights)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self.inflight == 0:
                return
            self._waiter = waiter = loop.create_future()
        try:
            await waiter
        finally:
            self._waiter = None

    def reopen(self) -> None:
        now = time.monotonic()
        for ep in self.registry.running.values():  # the pause is not idle time
            ep.last_activity = max(ep.last_activity, now)
        self._open.set()

    def enter(self) -> None:
        with self._lock:
            self.inflight += 1

    def exit(self) -> None:
        """A request was answered (called from any thread); wakes `drained()` only when it waits for this."""
        with self._lock:
            self.inflight -= 1
            waiter = self._waiter if self.inflight == 0 else None
        if waiter is not None:
            _on_loop(waiter.get_loop(), lambda: waiter.done() or waiter.set_result(None))


class GatedEngine:
    """The trainable engine as a `Sampler`: each submitted request counts in the gate until answered."""

    def __init__(self, engine: Any, gate: EngineGate):
        self.engine = engine
        self.gate = gate

    @property
    def tokenizer(self) -> Any:
        return self.engine.tokenizer

    @property
    def max_model_len(self) -> int:
        return self.engine.max_model_len

    @property
    def version(self) -> int:
        return getattr(self.engine, "version", 0)

    def submit(self, prompt_ids: list[int], sampling: Any,
               on_token: Callable[[int, float], None] | None = None) -> Future:
        fut = self.engine.submit(prompt_ids, sampling, on_token=on_token)
        self.gate.enter()
        fut.add_done_callback(lambda _f: self.gate.exit())
        return fut


def _on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[[], None]) -> None:
    try:
        loop.call_soon_threadsafe(fn)
    except RuntimeError:  # the loop has closed (server exit): nobody waits for the count any more
        pass


class Trainer:
    def __init__(self, *, engine: Any, pool: Pool, store: Any, job: TrainJob, config: ServerConfig,
                 gate: EngineGate, sink: Any, tally: Tally, notes: list[str], errors: deque[str], step: int = 0):
        self.engine = engine  # vibe_rl.engine.base.Engine: train, save
        self.pool = pool  # completed episodes by task group; its `filled` event wakes the loop
        self.store = store  # vibe_rl.swarm.server.store.Store: episode statuses, metadata, update records
        self.job = job
        self.config = config  # max_abs_reward, incomplete_group_ttl
        self.gate = gate  # closed while an update runs (the sync semantics)
        self.sink = sink  # vibe_rl.swarm.observe.loggers.MetricsSink, or None
        self.tally = tally  # discarded / aborted / expired episodes (expired is counted here)
        self.notes, self.errors = notes, errors  # the serving status's notes and errors
        self.global_step = step
        self.last_update: dict[str, Any] | None = None
        self.update_failures = 0  # consecutive failed updates of the same groups
        self.eval_rewards: list[float] = []  # rewards of eval episodes ended since the last update
        self.eval_wins: list[bool | None] = []  # and their reported outcomes (metadata 'win'; None: not reported)
        self._closing = False
        self._task: asyncio.Task | None = None
        self._current: asyncio.Task | None = None  # the update in progress

    @property
    def finished(self) -> bool:
        total = self.job.train.total_steps
        return bool(total) and self.global_step >= total

    @property
    def updating(self) -> bool:
        return self._current is not None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self.run())

    async def close(self) -> None:
        """Let an update in progress finish (its step and checkpoint stand), then end the loop."""
        self._closing = True
        if self._current is not None:
            await asyncio.shield(self._current)
        if self._task is not None:
            self._task.cancel()

    def record_eval(self, reward: float, win: bool | None = None) -> None:
        """An eval episode ended: served, never trained on; its reward and outcome (`win`, None when its metadata
        did not report one) are logged with the next update (`observe.winrate.eval_metrics`)."""
        self.eval_rewards.append(reward)
        self.eval_wins.append(win)

    async def run(self) -> None:
        while not self._closing and not self.finished:
            if not self.pool.ready():
                self.pool.filled.clear()
                await self.pool.filled.wait()
                continue
            self._current = asyncio.ensure_future(self.update())
            try:
                await asyncio.shield(self._current)
            except Exception as exc:  # not a training failure (those are contained): wait for the next episode
                log.exception("weight update crashed")
                self.errors.append(f"weight update {self.global_step + 1} crashed: {type(exc).__name__}: {exc}")
                self.pool.filled.clear()
                await self.pool.filled.wait()
            finally:
                self._current = None

    async def update(self) -> None:
        self.gate.close()
        started = time.monotonic()
        try:
            await self.gate.drained()  # calls already inside the engine finish on the old weights
            groups, dummy = self.pool.take()
            if dummy:
                self.store.mark([e.episode_uuid for g in dummy for e in g], "skipped")
                self.notes.append(f"skipped {sum(len(g) for g in dummy)} episodes of {len(dummy)} tasks with "
                                  "equal rewards (non_dummy_tasks policy)")
            await self._train(groups, started)
        finally:
            self.gate.reopen()  # waiting calls go on; the pause is not idle time for running episodes

    async def _train(self, groups: list, started: float) -> None:
        mode = self.job.train.advantage  # a per-seat mode reads the episodes' output metadata (seat_rewards)
        metadata = self.store.episode_metadata([e.episode_uuid for g in groups for e in g]) if mode != "group" else {}
        batch = updates.build_batch(groups, self.config.max_abs_reward, mode, metadata)
        for group, why in batch.rejected:
            self.store.mark([e.episode_uuid for e in group], "failed")
            self.errors.append(f"task {group[0].task_id!r} ({len(group)} episodes) cannot be trained on and was "
                               f"marked 'failed' (other tasks are unaffected): {why}")
        if not batch.groups:
            return
        if batch.info.get("episodes_without_calls"):  # once per update, not per episode
            log.warning("weight update %d: %d of %d episodes made no LLM call, so nothing of them is trained "
                        "(does the client call the model through the episode's key, ep.openai()?)",
                        self.global_step + 1, batch.info["episodes_without_calls"], sum(len(g) for g in batch.groups))
        uuids = [e.episode_uuid for g in batch.groups for e in g]
        try:
            metrics = await asyncio.to_thread(updates.train_step, self.engine, self.job, batch)
        except Exception as exc:
            log.exception("weight update failed")
            self._failed(batch.groups, uuids, exc)
            return
        self.update_failures = 0
        self.global_step += 1
        self.store.mark(uuids, "trained", self.global_step)
        step, train = self.global_step, self.job.train
        if train.save_freq and step % train.save_freq == 0:
            try:
                await asyncio.to_thread(updates.save_checkpoint, self.engine, self.job, step)
                metrics["checkpoint"] = step
            except Exception as exc:  # the step stands; its episodes are retrained if the server restarts
                log.error("checkpoint failed: %s", exc)
                metrics["checkpoint_failed"] = step
                self.errors.append(f"{exc} Episodes trained since that checkpoint stay in the store and are "
                                   "trained again after a restart.")
        metrics["update_s"] = round(time.monotonic() - started, 3)
        if self.eval_rewards:  # eval episodes ended since the last update (served, never trained on)
            rewards, wins, self.eval_rewards, self.eval_wins = self.eval_rewards, self.eval_wins, [], []
            metrics.update(eval_metrics(rewards, wins))  # eval/reward_mean, eval/win_rate with its 95% interval
        if self.sink is not None:  # throughput, counts, then the job's loggers (jsonl, tensorboard, ...)
            metrics = self.sink.finish(step, metrics, discarded_episodes=self.tally.discarded,
                                       aborted_episodes=self.tally.aborted)
        self.store.record_update(step, metrics)
        if self.finished:
            self.notes.append(f"reached train.total_steps={train.total_steps}: no more weight updates; "
                              "completed episodes are still stored")
        self.last_update = {"step": step, **metrics}
        log.info("weight update %d: %s", step, metrics)

    def _failed(self, groups: list, uuids: list[str], exc: Exception) -> None:
        self.update_failures += 1
        if self.update_failures >= 3:
            self.store.mark(uuids, "failed")
            fate = f"failed {self.update_failures} times in a row, so its episodes were marked 'failed'"
            self.update_failures = 0
        else:
            self.pool.put_back(groups)
            fate = "its episodes stay in the pool and will be retried"
        self.errors.append(f"weight update {self.global_step + 1} on {len(uuids)} episodes failed ({fate}): "
                           f"{type(exc).__name__}: {exc}")

    def expire_groups(self, now: float | None = None) -> int:
        """Discard task groups left incomplete past the TTL (their clients died); count and note them."""
        stale = self.pool.expire(self.config.incomplete_group_ttl, now)
        if not stale:
            return 0
        uuids = [e.episode_uuid for g in stale for e in g]
        self.store.mark(uuids, "expired")
        self.tally.expired += len(uuids)
        self.store.set_meta("expired_episodes", self.tally.expired)
        note = (f"discarded {len(uuids)} episodes of {len(stale)} tasks that stayed below grpo_n="
                f"{self.job.train.grpo_n} for {self.config.incomplete_group_ttl:g} s without a new episode "
                "(marked 'expired' in the store; did their clients die?)")
        self.notes.append(note)
        del self.notes[:-50]
        log.warning(note)
        return len(uuids)
