"""Race to ten: two seats take turns adding 1, 2 or 3 to a running total; the seat that makes the total
exactly TARGET wins. A seat that gives no legal move loses at once.

The rules only (no LLM, no I/O): replace them with your own game and keep test_game.py passing.
"""

import random
from dataclasses import dataclass, field

TARGET = 10
MOVES = (1, 2, 3)
SEATS = 2


@dataclass
class Game:
    total: int = 0
    turn: int = 0  # the seat to move
    history: list[tuple[int, int]] = field(default_factory=list)  # (seat, move)
    winner: int | None = None
    forfeit: int | None = None  # the seat that gave no legal move, if any

    @property
    def over(self) -> bool:
        return self.winner is not None

    def legal(self) -> list[int]:
        return [m for m in MOVES if self.total + m <= TARGET]

    def play(self, move: int | None) -> None:
        """Play `move` for the seat to move; None or an illegal move loses the game for that seat."""
        seat = self.turn
        if move not in self.legal():
            self.forfeit, self.winner = seat, 1 - seat
            return
        self.total += move
        self.history.append((seat, move))
        if self.total == TARGET:
            self.winner = seat
        else:
            self.turn = 1 - seat


def new_game(seed: int) -> Game:
    """The seed fixes the start (total and first seat): one seed is one task, replayed grpo_n times."""
    rng = random.Random(seed)
    return Game(total=rng.randint(0, 5), turn=rng.randint(0, SEATS - 1))
