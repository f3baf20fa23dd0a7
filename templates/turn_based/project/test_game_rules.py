"""Tests of game_rules.py: `python -m pytest test_game_rules.py`. Rewrite them with your game's rules."""

import random

import pytest

from game_rules import MAX_TURNS, NUM_PLAYERS, apply_action, current_player, legal_actions, new_game, observation


def play_randomly(seed: int):
    state, rng = new_game(seed), random.Random(seed)
    while state.winners is None:
        seat = current_player(state)
        actions = legal_actions(state, seat)
        assert actions, "a player who must act has no legal action"
        assert isinstance(observation(state, seat), str)
        apply_action(state, seat, rng.choice(actions))
    return state


def test_same_seed_same_game():
    assert new_game(7) == new_game(7)


def test_every_random_game_ends_within_the_turn_limit():
    for seed in range(50):
        state = play_randomly(seed)
        assert state.turn <= MAX_TURNS
        assert all(0 <= seat < NUM_PLAYERS for seat in state.winners)


def test_illegal_moves_are_refused():
    state = new_game(3)
    with pytest.raises(ValueError):
        apply_action(state, current_player(state), "not an action")
    with pytest.raises(ValueError):
        apply_action(state, (current_player(state) + 1) % NUM_PLAYERS, legal_actions(state, 0)[0])
