"""The snapshot cache of checkpoint-sourced static models, on checkpoint directories without weights (a stand-in
loader: no model runs here; tests/swarm/test_checkpoint_opponents.py serves real checkpoints)."""

from __future__ import annotations

import asyncio
import random

import pytest

from vibe_rl.schema import StaticModel, TrainJob
from vibe_rl.schema.snapshot import parse_source
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


def test_by_win_rate_pool_draws_the_checkpoints_the_learner_loses_to(tmp_path):
    snaps = snapshots(tmp_path, [1, 2, 3])
    model = StaticModel(name="past", source="checkpoint:pool:last-2:by-win-rate")
    assert str(parse_source(model.source)) == "checkpoint:pool:last-2:by-win-rate"
    assert snaps.weight("past", 2) == snaps.weight("past", 3) == 0.25  # never played: p = 1/2
    for _ in range(18):  # the learner beats step 3 every time and loses to step 2 every time
        snaps.record({"past": 3}, True)
        snaps.record({"past": 2}, False)
    snaps.record({"past": 2}, None)  # no boolean win: not counted
    assert snaps.results[("past", 2)] == [0, 18] and snaps.results[("past", 3)] == [18, 18]
    assert snaps.weight("past", 3) == (1 - 19 / 20) ** 2 and snaps.weight("past", 2) == (1 - 1 / 20) ** 2
    drawn = [snaps.pick(model) for _ in range(400)]
    assert set(drawn) <= {2, 3} and drawn.count(2) > 0.95 * len(drawn)  # weights 0.9025 : 0.0025
    uniform = [snaps.pick(StaticModel(name="past", source="checkpoint:pool:last-2")) for _ in range(400)]
    assert 120 < uniform.count(2) < 280  # the plain pool ignores the record
