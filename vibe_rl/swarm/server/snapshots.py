"""Past checkpoints of the trainable model, served frozen to static models with a `source`.

Rules:
- The checkpoints are the server's own: `<experiment.dir>/checkpoints/step_NNNNNN` (a directory under its
  final name is complete: `engine.checkpoint` renames it into place). Step 0 stands for the initial model,
  which plays while no checkpoint exists yet (noted once in the log).
- An episode picks its snapshot at its first call of the static model and keeps it to its end
  (`Episode.snapshots`): `latest` re-reads the directory then, so a newer checkpoint is taken at the next
  episode, never mid-episode; `pool:last-K` draws uniformly among the K newest.
- `pool:last-K:by-win-rate` draws step s among the K newest with weight (1 - p_s)^2, where
  p_s = (wins_s + 1) / (games_s + 2) is the learner's win rate against s so far, smoothed (Laplace), over the
  ended episodes that played s and reported a boolean `metadata['win']` (the learner side's outcome; `record`):
  a checkpoint never played weighs (1/2)^2, one the learner always beats tends to 0 but never reaches it.
- A LoRA checkpoint plays its base model with the adapter merged in (`engine.checkpoint.merged_weights`,
  written once to the checkpoint's `merged/`).
- Loaded lazily, at most `snapshot_cache` per static model (least recently used out); an evicted engine
  still generating is closed when its last call ends.
- The turn records model `<name>@step_N` and weight_version N (the frozen engine's version is set to N).
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vibe_rl.schema import StaticModel, TrainJob
from vibe_rl.schema.snapshot import parse_source
from vibe_rl.swarm.server.errors import ApiError

log = logging.getLogger("vibe_rl.swarm.server")
_STEP_DIR = re.compile(r"step_(\d+)")


class Snapshot:
    """One loaded checkpoint and the calls using it."""

    def __init__(self, step: int, engine: Any):
        self.step, self.engine, self.users, self.retired = step, engine, 0, False

    def hold(self) -> Callable[[], None]:
        """Count one call; the returned release (idempotent) ends it and closes a retired engine when idle."""
        self.users += 1
        done = False

        def release() -> None:
            nonlocal done
            if not done:
                done = True
                self.users -= 1
                if self.retired and self.users == 0:
                    asyncio.get_running_loop().create_task(asyncio.to_thread(self.engine.close))
        return release


class Snapshots:
    def __init__(self, job: TrainJob, load_frozen: Callable[[str], Any], rng: random.Random | None = None):
        self.root = Path(job.experiment.dir) / "checkpoints"
        self.save_freq = job.train.save_freq
        self._load = load_frozen
        self._rng = rng or random.Random()
        self._cache: dict[str, OrderedDict[int, Snapshot]] = {}
        self._lock = asyncio.Lock()
        self._noted: set[str] = set()
        self.results: dict[tuple[str, int], list[int]] = {}  # (static model, step) -> [learner wins, games]

    def steps(self) -> list[int]:
        """The steps of the complete checkpoints, oldest first."""
        if not self.root.is_dir():
            return []
        found = (_STEP_DIR.fullmatch(p.name) for p in self.root.iterdir() if p.is_dir())
        return sorted(int(m.group(1)) for m in found if m)

    def boot_notes(self, models: list[StaticModel]) -> list[str]:
        """A note per checkpoint-sourced static model that the initial model will play for now."""
        if self.steps():
            return []
        return [self._initial_note(m) for m in models if m.source]

    def _initial_note(self, model: StaticModel) -> str:
        self._noted.add(model.name)
        every = f"every {self.save_freq} steps (train.save_freq)" if self.save_freq else \
            "never: train.save_freq is 0, set it to write some"
        return (f"static model {model.name!r} ({model.source}): no checkpoint in {self.root} yet, so the initial "
                f"model plays it until one exists (checkpoints are written {every})")

    def pick(self, model: StaticModel) -> int:
        """The step an episode starting now plays (0: the initial model); 404 naming the steps for a missing one."""
        source, steps = parse_source(model.source or ""), self.steps()
        if source.kind == "step":
            if source.step not in steps:
                have = f"available steps: {steps}" if steps else "no checkpoint exists yet"
                use = f"source: checkpoint:step:{steps[-1]}" if steps else "source: checkpoint:latest"
                raise ApiError(404, f"Static model {model.name!r} plays {source}, but {self.root} holds no checkpoint "
                                    f"of step {source.step} ({have}). Use one that exists ({use}), or "
                                    "checkpoint:latest / checkpoint:pool:last-K in the server's --config; "
                                    f"checkpoints are written every train.save_freq={self.save_freq} steps.",
                               code="checkpoint_not_found", param="model")
            return source.step
        if not steps:
            if model.name not in self._noted:
                log.warning("%s", self._initial_note(model))
            return 0
        if source.kind == "latest":
            return steps[-1]
        pool = steps[-source.last:]
        if not source.by_win_rate:
            return self._rng.choice(pool)
        return self._rng.choices(pool, weights=[self.weight(model.name, s) for s in pool])[0]

    def weight(self, name: str, step: int) -> float:
        """(1 - p)^2 with p the learner's Laplace-smoothed win rate against `step` of static model `name`."""
        wins, games = self.results.get((name, step), (0, 0))
        return (1.0 - (wins + 1) / (games + 2)) ** 2

    def record(self, picked: dict[str, int], win: bool | None) -> None:
        """An ended episode's outcome against the snapshots it played (`Episode.snapshots`); no `win`: nothing."""
        if win is None:
            return
        for name, step in picked.items():
            tally = self.results.setdefault((name, step), [0, 0])
            tally[0] += int(win)
            tally[1] += 1

    async def get(self, model: StaticModel, step: int) -> tuple[Any, Callable[[], None]]:
        """(engine of `step`, release): loaded on first use, the least recently used one out past the bound."""
        async with self._lock:
            cache = self._cache.setdefault(model.name, OrderedDict())
            snap = cache.get(step)
            if snap is None:
                snap = Snapshot(step, await asyncio.to_thread(self._load_step, step))
                cache[step] = snap
                log.info("static model %r: loaded checkpoint step %d (%s)", model.name, step, model.source)
            cache.move_to_end(step)
            release = snap.hold()
            while len(cache) > model.snapshot_cache:
                _, old = cache.popitem(last=False)
                old.retired = True
                if old.users == 0:
                    await asyncio.to_thread(old.engine.close)
        return snap.engine, release

    def _load_step(self, step: int) -> Any:
        from vibe_rl.engine.checkpoint import merged_weights
        from vibe_rl.errors import ModelLoadError

        try:
            weights = merged_weights(self.root / f"step_{step:06d}")
        except ModelLoadError as e:
            raise ApiError(404, str(e), code="checkpoint_not_found", param="model") from e
        engine = self._load(str(weights))
        engine.version = step  # the turns' weight_version and the body's system_fingerprint name the snapshot
        return engine

    async def close(self) -> None:
        for cache in self._cache.values():
            for snap in cache.values():
                await asyncio.to_thread(snap.engine.close)
        self._cache.clear()
