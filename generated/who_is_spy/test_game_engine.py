"""Rules of game_engine.py. Run: python -m pytest test_game_engine.py"""

import random

import pytest

import game_engine
from game_engine import (
    CIVILIAN,
    HIT_CREDIT,
    SHAPED_REWARD,
    SHAPING,
    SPY,
    new_game,
    outcome_reward,
    shaped_reward,
    side_reward,
)


def make(num_players=5, num_spies=1, max_rounds=5, seed=0):
    names = [f"Name {i}" for i in range(20)]
    return new_game("apple", "pear", names, random.Random(seed), num_players, num_spies, max_rounds)


def ids(game, role):
    return [p.pid for p in game.players if p.role == role]


def everyone_votes(game, target):
    return {p.pid: target for p in game.alive() if p.pid != target} | {target: game.alive()[0].pid}


def test_deal():
    game = make(6, 2)
    assert len(ids(game, SPY)) == 2 and len(ids(game, CIVILIAN)) == 4
    assert {p.word for p in game.players if p.role == SPY} == {"pear"}
    assert len({p.pid for p in game.players}) == 6 and len({p.name for p in game.players}) == 6
    assert game.winner() is None


def test_shuffled_per_seed():
    assert [p.pid for p in make(seed=1).players] != [p.pid for p in make(seed=2).players]


@pytest.mark.parametrize("players,spies", [(2, 1), (4, 2), (5, 0)])
def test_invalid_setup(players, spies):
    with pytest.raises(ValueError):
        make(players, spies)


def test_civilians_win_when_spy_voted_out_in_first_round():
    game = make()
    spy = ids(game, SPY)[0]
    assert game.vote(everyone_votes(game, spy)) == spy
    assert game.winner() == CIVILIAN


def test_spies_win_when_they_match_civilians():
    game = make(4, 1)  # 1 spy vs 3 civilians
    civilians = ids(game, CIVILIAN)
    game.vote(everyone_votes(game, civilians[0]))
    assert game.winner() is None  # 1 vs 2
    game.vote(everyone_votes(game, civilians[1]))
    assert game.winner() == SPY  # 1 vs 1


def test_first_round_elimination_can_end_game_for_spies():
    game = make(3, 1)
    game.vote(everyone_votes(game, ids(game, CIVILIAN)[0]))
    assert game.winner() == SPY


def test_tie_eliminates_nobody():
    game = make(4, 1)
    a, b, c, d = (p.pid for p in game.players)
    assert game.vote({a: b, b: a, c: d, d: c}) is None
    assert all(p.alive for p in game.players) and game.round == 2


def test_invalid_votes_are_abstentions():
    game = make(4, 1)
    a, b, c, d = (p.pid for p in game.players)
    assert game.vote({a: a, b: "player_x", c: None, d: None}) is None  # self vote, unknown, silence
    assert game.vote({a: b, c: b, d: None}) == b
    assert game.vote({a: b, c: b, d: c}) == c  # votes for the eliminated b do not count


def test_round_limit_makes_spies_win():
    game = make(5, 1, max_rounds=2)
    game.vote({})
    assert game.winner() is None
    game.vote({})
    assert game.winner() == SPY


def test_saying_the_word_is_masked():
    game = make()
    civilian = ids(game, CIVILIAN)[0]
    assert game.describe(civilian, "An Apple a day, apple pie") == "An *** a day, *** pie"
    assert game.descriptions[-1][1] == civilian


def test_ids_are_seats_dealt_at_random():
    game = make(5)
    assert sorted(p.pid for p in game.players) == [f"player_{i}" for i in range(1, 6)]


@pytest.mark.parametrize("hit_credit", [HIT_CREDIT, 0.0])
def test_shaped_reward_credits_legal_ballots_and_hits_on_the_spy(monkeypatch, hit_credit):
    monkeypatch.setattr(game_engine, "HIT_CREDIT", hit_credit)
    game = make(5)  # 1 spy, 4 civilians
    spy, civilians = ids(game, SPY)[0], ids(game, CIVILIAN)
    # two civilians name the spy, one names a civilian, one abstains; the spy's own ballot is not counted
    ballots = {civilians[0]: spy, civilians[1]: spy, civilians[2]: civilians[0], civilians[3]: None,
               spy: civilians[0]}
    assert game.vote(ballots) is None  # a 2-2 tie: nobody is out
    assert outcome_reward(game, CIVILIAN) == 0.0 and game.winner() is None
    assert shaped_reward(game, CIVILIAN) == pytest.approx(SHAPING * (3 / 4 + hit_credit * 2 / 4))
    game.vote(everyone_votes(game, spy))
    assert game.winner() == CIVILIAN
    # 8 civilian ballots over two rounds: 7 legal, 6 on the spy; plus the win
    assert shaped_reward(game, CIVILIAN) == pytest.approx(1.0 + SHAPING * (7 / 8 + hit_credit * 6 / 8))
    # the spy survived round 1 of the 2 played
    assert shaped_reward(game, SPY) == 0.0 + SHAPING * 1 / 2


def test_a_seat_earns_its_own_dense_credit_and_its_side_outcome(monkeypatch):
    monkeypatch.setattr(game_engine, "HIT_CREDIT", 1.0)
    game = make(5)  # 1 spy, 4 civilians
    spy, civilians = ids(game, SPY)[0], ids(game, CIVILIAN)
    ballots = {civilians[0]: spy, civilians[1]: civilians[0], civilians[2]: None, civilians[3]: spy,
               spy: civilians[0]}
    assert game.vote(ballots) is None  # a 2-2 tie: nobody is out
    assert shaped_reward(game, CIVILIAN, seats=[civilians[0]]) == pytest.approx(SHAPING * 2)  # legal, on the spy
    assert shaped_reward(game, CIVILIAN, seats=[civilians[1]]) == pytest.approx(SHAPING)  # legal only
    assert shaped_reward(game, CIVILIAN, seats=[civilians[2]]) == 0.0  # an abstention
    team = shaped_reward(game, CIVILIAN)
    assert team == pytest.approx(sum(shaped_reward(game, CIVILIAN, seats=[c]) for c in civilians) / 4)
    game.vote(everyone_votes(game, spy))
    assert shaped_reward(game, CIVILIAN, seats=[civilians[2]]) == pytest.approx(1.0 + SHAPING * (1 + 1) / 2)
    assert shaped_reward(game, SPY, seats=[spy]) == shaped_reward(game, SPY)  # one spy: its seat is the side


def test_side_reward_follows_the_shaped_reward_switch():
    game = make()
    game.vote(everyone_votes(game, ids(game, SPY)[0]))
    expected = shaped_reward(game, CIVILIAN) if SHAPED_REWARD else 1.0
    assert side_reward(game, CIVILIAN) == expected
