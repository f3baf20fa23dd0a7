"""Per-seat credit for games (train.advantage): each mode against its equation in vibe_rl.rl.advantages."""

from __future__ import annotations

import math

import pytest

from vibe_rl.errors import ConfigError
from vibe_rl.rl.advantages import (
    Seat,
    assign_seat_advantages,
    episode_seats,
    grpo_advantages,
    seat_advantages,
    seat_rewards_of,
)
from vibe_rl.rl.samples import Sample


def _sample(episode: str, *players: str) -> Sample:
    return Sample([1, 2], [0, 1], [0.0, -1.0], task_id="t", episode_id=episode, players=list(players))


def test_seat_groups_by_task_and_role_not_by_task_alone():
    # one task; e1, e2 are civilians' games, e3, e4 spies' games (team reward = the episode's)
    seats = [Seat("e1", "t", "civilian:p1", 1.0), Seat("e2", "t", "civilian:p2", 0.0),
             Seat("e3", "t", "spy:p3", 1.0), Seat("e4", "t", "spy:p1", 1.0)]
    by_task = grpo_advantages(["t"] * 4, [s.reward for s in seats])
    assert by_task.values[2] > 0.5  # the default credits the spies: their reward beats the task mean 0.75
    adv = seat_advantages(seats, "seat")
    assert adv.num_groups == 2 and adv.num_all_equal_groups == 1  # (t, civilian) and (t, spy)
    assert [round(v, 4) for v in adv.values] == [1.0, -1.0, 0.0, 0.0]  # spies all won: no signal among them
    raw = seat_advantages(seats, "seat", scale_by_std=False)
    assert raw.values == [0.5, -0.5, 0.0, 0.0]


def test_team_versus_individual_reward():
    samples = {"e1": [_sample("e1", "civilian:p1"), _sample("e1", "spy:p2")],
               "e2": [_sample("e2", "civilian:p1"), _sample("e2", "spy:p2")]}
    team = {"e1": 1.0, "e2": 0.0}
    own = {"e1": {"civilian:p1": 1.0, "spy:p2": -1.0}, "e2": {"civilian:p1": 0.0}}  # e2's spy not reported
    for mode, spy_signs, missing_n in (("seat", (1, -1), 0), ("individual", (-1, 1), 1)):
        seats, missing = [], 0
        for e in ("e1", "e2"):
            s, m = episode_seats(samples[e], e, "t", team[e], mode, own[e])
            seats += s
            missing += m
        assert missing == missing_n
        assert [s.reward for s in seats] == ([1.0, 1.0, 0.0, 0.0] if mode == "seat" else [1.0, -1.0, 0.0, 0.0])
        adv = seat_advantages(seats, mode)
        spy = [adv.values[1], adv.values[3]]
        assert [math.copysign(1, v) for v in spy] == list(spy_signs)  # the spy's credit flips with its own reward
        assert math.isclose(adv.values[0], 1.0, rel_tol=1e-4)  # the civilian's is the same either way


def test_role_baseline_spans_the_batch():
    seats = [Seat("e1", "a", "civilian:p1", 1.0), Seat("e2", "b", "civilian:p2", 0.0),
             Seat("e3", "b", "civilian:p1", 0.5), Seat("e4", "b", "spy:p2", 3.0)]
    adv = seat_advantages(seats, "role_baseline", scale_by_std=False)
    assert adv.values == [0.5, -0.5, 0.0, 0.0]  # civilian baseline 0.5 across tasks a and b; the lone spy: 0
    assert adv.num_groups == 2 and adv.num_all_equal_groups == 1
    scaled = seat_advantages(seats, "role_baseline")
    std = math.sqrt((0.25 + 0.25 + 0.0) / 3)
    assert math.isclose(scaled.values[0], 0.5 / (std + 1e-6))
    assert grpo_advantages(["a"], [1.0]).values == [0.0]  # per task, e1 alone would get no credit at all


def test_zero_sum_seats_of_one_game_sum_to_zero():
    seats = [Seat("e1", "t", "civilian:p1", 1.0), Seat("e1", "t", "civilian:p2", 1.0), Seat("e1", "t", "spy:p3", -2.0),
             Seat("e2", "t", "civilian:p1", 5.0), Seat("e2", "t", "spy:p2", 3.0), Seat("e3", "t", "spy:p1", 7.0)]
    adv = seat_advantages(seats, "zero_sum")
    for game in (adv.values[0:3], adv.values[3:5]):
        assert abs(sum(game)) < 1e-9
    assert adv.values[5] == 0.0  # a game of one seat has nothing to share
    centred = [1.0, 1.0, -2.0, 1.0, -1.0, 0.0]
    std = math.sqrt(sum(c * c for c in centred) / 6)
    assert all(math.isclose(a, c / (std + 1e-6), abs_tol=1e-12) for a, c in zip(adv.values, centred, strict=True))
    assert adv.values[3] > 0 > adv.values[4]  # e2: both positive rewards, but the civilian beat the spy
    tie = seat_advantages([Seat("e1", "t", "a:1", 2.0), Seat("e1", "t", "b:2", 2.0)], "zero_sum")
    assert tie.values == [0.0, 0.0] and tie.num_all_equal_groups == 1


def test_a_sample_gets_the_mean_of_the_seats_it_holds():
    seats = [Seat("e1", "t", "civilian:p1", 1.0), Seat("e1", "t", "spy:p2", 0.0), Seat("e2", "t", "", 0.0)]
    adv = seat_advantages(seats, "seat")  # civilian and spy are single-seat sets: 0; set it by hand below
    adv.values = [0.8, -0.4, 0.3]
    both, civ, untagged = _sample("e1", "civilian:p1", "spy:p2"), _sample("e1", "civilian:p1"), _sample("e2")
    assign_seat_advantages([both, civ, untagged], seats, adv)
    assert (both.advantage, civ.advantage, untagged.advantage) == (pytest.approx(0.2), 0.8, 0.3)
    found, _ = episode_seats([both, untagged], "e1", "t", 1.0, "seat", {})
    assert [s.player for s in found] == ["civilian:p1", "spy:p2", ""]


def test_bad_seat_rewards_and_modes_raise():
    assert seat_rewards_of({"kind": "x"}) == {} and seat_rewards_of(None) == {}
    assert seat_rewards_of({"seat_rewards": {"a:1": 1, "b:2": -0.5}}) == {"a:1": 1.0, "b:2": -0.5}
    with pytest.raises(ConfigError, match="map of player tag"):
        seat_rewards_of({"seat_rewards": [1.0, 2.0]})
    for bad in (float("nan"), "1", True):
        with pytest.raises(ConfigError, match="finite number"):
            seat_rewards_of({"seat_rewards": {"a:1": bad}})
    with pytest.raises(ConfigError, match="Unknown per-seat"):
        seat_advantages([], "group")
