"""The snapshot cache of checkpoint-sourced static models, on checkpoint directories without weights (a stand-in
loader: no model runs here; tests/swarm/test_checkpoint_opponents.py serves real checkpoints)."""

from __future__ import annotations

import asyncio
import random

import pytest

from vibe_rl.schema import StaticModel, TrainJob
from vibe_rl.swarm.server.errors import ApiError
from vibe_rl.swarm.server.snapshots import Snapshots


class Loaded:
    def __init__(self, path: str):
        self.path, self.closed, self.version = path, False, 0

    def close(self) -> None:
        self.closed = True


def snapshots(tmp_path, steps) -> Snapshots:
    for step in steps:
        (tmp_path / "checkpoints" / f"step_{step:06d}" / "model").mkdir(parents=True)
    (tmp_path / "checkpoints" / ".step_000009.tmp-1").mkdir(parents=True)  # a save in progress is not a checkpoint
    return Snapshots(TrainJob(experiment={"dir": str(tmp_path)}), Loaded, random.Random(0))


def test_lru_bound_and_an_evicted_snapshot_closes_when_its_call_ends(tmp_path):
    snaps = snapshots(tmp_path, [1, 2, 3])
    model = StaticModel(name="past", source="checkpoint:latest", snapshot_cache=1)

    async def run() -> None:
        one, release_one = await snaps.get(model, 1)
        two, release_two = await snaps.get(model, 2)  # step 1 out of the cache, but its call still runs
        assert one.version == 1 and two.version == 2 and not one.closed
        release_one()
        release_one()  # idempotent
        while not one.closed:  # closed by a task the release scheduled
            await asyncio.sleep(0.01)
        again, release = await snaps.get(model, 2)
        assert again is two and not two.closed
        release(), release_two()
        await snaps.get(model, 3)  # step 2 out, idle: closed at once
        assert two.closed
        await snaps.close()

    asyncio.run(run())
    assert snaps.steps() == [1, 2, 3]


def test_pick_latest_pool_step_and_the_initial_model(tmp_path):
    snaps = snapshots(tmp_path, [1, 2, 3])
    assert snaps.pick(StaticModel(name="a", source="checkpoint:latest")) == 3
    assert {snaps.pick(StaticModel(name="b", source="checkpoint:pool:last-2")) for _ in range(50)} == {2, 3}
    assert snaps.pick(StaticModel(name="c", source="checkpoint:step:2")) == 2
    with pytest.raises(ApiError, match=r"available steps: \[1, 2, 3\].*checkpoint:step:3"):
        snaps.pick(StaticModel(name="d", source="checkpoint:step:7"))
    empty = snapshots(tmp_path / "none", [])
    model = StaticModel(name="e", source="checkpoint:pool:last-3")
    assert empty.boot_notes([model])[0].startswith("static model 'e' (checkpoint:pool:last-3): no checkpoint in")
    assert empty.pick(model) == 0
