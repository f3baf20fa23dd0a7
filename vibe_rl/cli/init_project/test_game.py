"""The rules of game.py (run: python -m pytest -q test_game.py)."""

from game import TARGET, Game, new_game


def test_reaching_the_target_wins():
    game = Game(total=TARGET - 2, turn=1)
    game.play(2)
    assert game.over and game.winner == 1 and game.forfeit is None


def test_no_legal_move_loses_for_the_seat_that_gave_it():
    for move in (None, 0, 4):
        game = Game(total=0, turn=0)
        game.play(move)
        assert game.winner == 1 and game.forfeit == 0


def test_a_move_past_the_target_is_illegal():
    game = Game(total=TARGET - 1, turn=0)
    assert game.legal() == [1]
    game.play(3)
    assert game.forfeit == 0


def test_the_seed_fixes_the_start():
    assert new_game(7) == new_game(7)
    assert {(new_game(s).total, new_game(s).turn) for s in range(50)} != {(0, 0)}
