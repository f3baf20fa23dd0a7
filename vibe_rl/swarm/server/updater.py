"""The weight-update side of the serving class (a mixin of `SwarmServing`): when an update
starts, how a batch is built, trained and checkpointed, and how a failure stays contained.

- A task group that cannot be trained on (reward out of range, broken turns) is marked
  `failed` alone; the other groups of the batch still train.
- A failed optimiser step puts its groups back in the pool; only after 3 failures in a
  row are they marked `failed` (so a broken engine cannot loop forever).
- The step is counted before the checkpoint: a failed save (disk full, ...) is reported
  with its path, `global_step` still matches the weights, and the episodes trained since
  the latest checkpoint are retrained after a restart (`Store.untrained`).
- Incomplete task groups older than `incomplete_group_ttl` are discarded, counted, noted.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

log = logging.getLogger("vibe_rl.swarm")

ROLLING, WEIGHT_SYNCING = "ROLLING", "WEIGHT_SYNCING"


class UpdateLoop:
    """Mixin: expects the attributes `SwarmServing.__init__` sets (state, pool, store, engine, job, ...)."""

    state: str
    pool: Any
    store: Any
    engine: Any
    job: Any
    config: Any
    updates: Any
    global_step: int
    notes: list[str]
    errors: Any
    _rolling: asyncio.Event
    _drained: asyncio.Event

    def expire_groups(self, now: float | None = None) -> int:
        """Discard task groups left incomplete past the TTL (their clients died); count and note them."""
        if self.pool is None or self.store is None:
            return 0
        stale = self.pool.expire(self.config.incomplete_group_ttl, now)
        if not stale:
            return 0
        uuids = [e.episode_uuid for g in stale for e in g]
        self.store.mark(uuids, "expired")
        self.expired += len(uuids)
        self.store.set_meta("expired_episodes", self.expired)
        note = (f"discarded {len(uuids)} episodes of {len(stale)} tasks that stayed below grpo_n="
                f"{self.job.train.grpo_n} for {self.config.incomplete_group_ttl:g} s without a new episode "
                "(marked 'expired' in the store; did their clients die?)")
        self.notes.append(note)
        del self.notes[:-50]
        log.warning(note)
        return len(uuids)

    def _maybe_update(self) -> None:
        if (self.state == ROLLING and self._update_task is None and self.pool is not None and self.pool.ready()
                and not (self.job.train.total_steps and self.global_step >= self.job.train.total_steps)):
            self._update_task = self._spawn(self._update())

    async def _train(self, groups: list) -> None:
        """Build, train, count, then checkpoint. A group that cannot be trained on is marked failed alone;
        a failed step puts its groups back in the pool (marked failed only after 3 failures in a row); a
        failed checkpoint is reported with its path, and global_step still matches the weights."""
        mode = self.job.train.advantage  # a per-seat mode reads the episodes' output metadata (seat_rewards)
        metadata = self.store.episode_metadata([e.episode_uuid for g in groups for e in g]) if mode != "group" else {}
        batch = self.updates.build_batch(groups, self.config.max_abs_reward, mode, metadata)
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
            metrics = await asyncio.to_thread(self.updates.train_step, self.engine, self.job, batch)
        except Exception as exc:
            log.exception("weight update failed")
            self.update_failures += 1
            if self.update_failures >= 3:
                self.store.mark(uuids, "failed")
                fate = f"failed {self.update_failures} times in a row, so its episodes were marked 'failed'"
                self.update_failures = 0
            else:
                self.pool.put_back(batch.groups)
                fate = "its episodes stay in the pool and will be retried"
            self.errors.append(f"weight update {self.global_step + 1} on {len(uuids)} episodes failed ({fate}): "
                               f"{type(exc).__name__}: {exc}")
            return
        self.update_failures = 0
        self.global_step += 1
        self.store.mark(uuids, "trained", self.global_step)
        step, train = self.global_step, self.job.train
        if train.save_freq and step % train.save_freq == 0:
            try:
                await asyncio.to_thread(self.updates.save_checkpoint, self.engine, self.job, step)
                metrics["checkpoint"] = step
            except Exception as exc:  # the step stands; its episodes are retrained if the server restarts
                log.error("checkpoint failed: %s", exc)
                metrics["checkpoint_failed"] = step
                self.errors.append(f"{exc} Episodes trained since that checkpoint stay in the store and are "
                                   "trained again after a restart.")
        metrics["update_s"] = round(time.monotonic() - self._update_started, 3)
        if self.eval_rewards:  # eval episodes ended since the last update (served, never trained on)
            rewards, self.eval_rewards = self.eval_rewards, []
            metrics.update({"eval/episodes": len(rewards), "eval/reward_mean": sum(rewards) / len(rewards)})
        if self.sink is not None:  # throughput, counts, then the job's loggers (jsonl, tensorboard, ...)
            metrics = self.sink.finish(step, metrics, discarded_episodes=self.discarded, aborted_episodes=self.aborted)
        self.store.record_update(step, metrics)
        if train.total_steps and step >= train.total_steps:
            self.notes.append(f"reached train.total_steps={train.total_steps}: no more weight updates; "
                              "completed episodes are still stored")
        self.last_update = {"step": step, **metrics}
        log.info("weight update %d: %s", step, metrics)

    async def _update(self) -> None:
        self.state = WEIGHT_SYNCING
        self._rolling.clear()
        self._update_started = time.monotonic()
        try:
            await self._drained.wait()  # calls already inside the engine finish on the old weights
            groups, dummy = self.pool.take()
            if dummy:
                self.store.mark([e.episode_uuid for g in dummy for e in g], "skipped")
                self.notes.append(f"skipped {sum(len(g) for g in dummy)} episodes of {len(dummy)} tasks with "
                                  "equal rewards (non_dummy_tasks policy)")
            await self._train(groups)
        finally:
            now = time.monotonic()
            for ep in self.registry.running.values():  # the pause is not idle time
                ep.last_activity = max(ep.last_activity, now)
            self._update_task = None
            if self.state == WEIGHT_SYNCING:
                self.state = ROLLING
                self._rolling.set()
        self._maybe_update()
