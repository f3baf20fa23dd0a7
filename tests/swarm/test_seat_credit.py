"""Per-seat credit (train.advantage) through the server's update path: build_batch on recorded episodes,
and one real update on a real server driven by the openai SDK."""

from __future__ import annotations

import json
import sqlite3
import time

import openai
import pytest

from vibe_rl.rl.samples import Turn
from vibe_rl.swarm import SwarmClient, Task, TrainJob, WorkflowOutput, run_in_flight
from vibe_rl.swarm.server.pool import CompletedEpisode
from vibe_rl.swarm.server.updates import build_batch


def _turn(player: str, first: int) -> Turn:  # separate prompts: one sample per turn
    return Turn(prompt_ids=[first, 2, 3], response_ids=[4, 5], response_logprobs=[-0.5, -0.7], player=player)


def _game(uuid: str, task: str, reward: float) -> CompletedEpisode:
    return CompletedEpisode(uuid, task, reward, [_turn("civilian:p1", 10), _turn("spy:p2", 20)])


def test_build_batch_default_is_unchanged_and_seat_modes_credit_seats():
    groups = [[_game("e1", "t", 1.0), _game("e2", "t", 1.0)], [_game("e3", "u", 1.0), _game("e4", "u", 0.0)]]
    metadata = {"e1": {"seat_rewards": {"civilian:p1": 1.0, "spy:p2": -1.0}},
                "e2": {"seat_rewards": {"civilian:p1": -1.0, "spy:p2": 1.0}},
                "e3": {"seat_rewards": {"civilian:p1": 2.0}}, "e4": {}}
    default = build_batch(groups)
    assert [round(s.advantage, 4) for s in default.samples] == [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, -1.0, -1.0]
    assert default.info["all_equal_groups"] == 1 and "seats" not in default.info
    assert build_batch(groups, advantage="group", metadata=metadata).info == default.info  # metadata unread
    zero_sum = build_batch(groups, advantage="zero_sum", metadata=metadata)
    values = [round(s.advantage, 4) for s in zero_sum.samples]
    # task t: centred ±1, std 1. Task u: e3's civilian 2 vs its spy's team reward 1 -> c = ±0.5, e4's seats
    # tie -> c = 0; std over u's 4 seats sqrt(0.5 / 4), so ±0.5 / 0.3536 = ±1.4142 and 0
    assert values == [1.0, -1.0, -1.0, 1.0, 1.4142, -1.4142, 0.0, 0.0]
    assert zero_sum.info["seats"] == 8 and zero_sum.info["seat_rewards_missing"] == 3
    bad = dict(metadata, e3={"seat_rewards": {"civilian:p1": "won"}})
    batch = build_batch(groups, advantage="individual", metadata=bad)
    assert [g[0].task_id for g in batch.groups] == ["t"] and len(batch.samples) == 4  # the bad group alone
    assert [("finite number" in why) for _, why in batch.rejected] == [True]


@pytest.mark.parametrize("bogus", ["team", "GROUP"])
def test_the_job_field_takes_only_known_modes(bogus):
    from pydantic import ValidationError

    assert TrainJob().train.advantage == "group"
    assert TrainJob.model_validate({"train": {"advantage": "zero_sum"}}).train.advantage == "zero_sum"
    with pytest.raises(ValidationError):
        TrainJob.model_validate({"train": {"advantage": bogus}})


def _play(client: SwarmClient, task: Task, k: int) -> None:
    """A two-seat game (two calls, two samples); the team reward is always 0.5, the seats split 1 / -1 (who wins alternates)."""
    episode_uuid, api = client.begin_episode(discard_episode_timeout=120)
    llm = openai.OpenAI(base_url=api.base_url, api_key=api.api_key, max_retries=0)
    for player in ("civilian:p1", "spy:p2"):
        llm.chat.completions.create(model=api.model, messages=[{"role": "user", "content": f"{player}: describe"}],
                                    user=player)
    win = 1.0 if k % 2 else -1.0
    client.end_episode(task, episode_uuid, WorkflowOutput(
        reward=0.5, metadata={"seat_rewards": {"civilian:p1": win, "spy:p2": -win}}))


def test_one_zero_sum_update_on_a_real_server(make_server):
    server = make_server("seats", sets=["train.advantage=zero_sum", "train.save_freq=0", "train.batch_size=1",
                                           "train.grpo_n=2", "rollout.max_tokens=4"])
    client = SwarmClient(server.url)
    status = client.auto_sync_train_config_and_start_engine(TrainJob(), verbose=False)
    assert status["state"] == "ROLLING" and status["job"]["train"]["advantage"] == "zero_sum"
    items = [(Task(task_id="game"), k) for k in range(2)]  # batch_size 1 x grpo_n 2
    report = run_in_flight(lambda it: _play(client, *it), items, max_in_flight=len(items))
    assert report.failed == 0, report.failures
    deadline = time.monotonic() + 60
    while client.get_engine_status()["global_step"] < 1:
        assert time.monotonic() < deadline, client.get_engine_status()
        time.sleep(0.1)
    (raw,) = sqlite3.connect(f"{server.exp_dir}/swarm.sqlite").execute("SELECT metrics_json FROM updates").fetchone()
    m = json.loads(raw)
    # The default ('group'): every team reward is 0.5, so both tasks are all-equal and every advantage 0.
    # zero_sum: c = ±1 per game, std over the task's seats 1, so A = ±1 / (1 + 1e-6) on every sample.
    assert m["reward_mean"] == 0.5 and m["seats"] == 4 and m["seat_rewards_missing"] == 0
    assert m["groups"] == 1 and m["all_equal_groups"] == 0
    assert m["num_samples"] == 4 and m["zero_advantage_samples"] == 0
    assert m["advantage_abs_mean"] == pytest.approx(1 / (1 + 1e-6), rel=1e-9)
