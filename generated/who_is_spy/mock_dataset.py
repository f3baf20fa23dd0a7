"""Write mock_game_dataset.json: 200 games, each a word pair and a unique seed (the task_id).

Run `python mock_dataset.py` to regenerate; the output is deterministic.
"""

import json
import random
from pathlib import Path

from game_engine import MAX_ROUNDS, NUM_PLAYERS, NUM_SPIES

NUM_TASKS = 200
WORD_PAIRS = [
    ("apple", "pear"), ("coffee", "tea"), ("piano", "guitar"), ("cat", "tiger"), ("river", "lake"),
    ("train", "bus"), ("pencil", "crayon"), ("moon", "sun"), ("doctor", "nurse"), ("soccer", "rugby"),
    ("bread", "cake"), ("rose", "tulip"), ("winter", "autumn"), ("laptop", "tablet"), ("shark", "dolphin"),
    ("castle", "palace"), ("violin", "cello"), ("honey", "syrup"), ("eagle", "hawk"), ("beach", "desert"),
    ("pizza", "burger"), ("mirror", "window"), ("candle", "lamp"), ("wolf", "dog"), ("milk", "yogurt"),
    ("rain", "snow"), ("jacket", "sweater"), ("bicycle", "scooter"), ("library", "bookstore"), ("lemon", "orange"),
    ("chess", "checkers"), ("butter", "cheese"), ("camera", "telescope"), ("forest", "jungle"), ("ship", "submarine"),
    ("teacher", "professor"), ("dumpling", "ravioli"), ("umbrella", "raincoat"), ("bee", "wasp"), ("salt", "sugar"),
]


def make_games(num_tasks: int = NUM_TASKS, seed: int = 2024) -> list[dict]:
    rng = random.Random(seed)
    seeds = rng.sample(range(100_000, 1_000_000), num_tasks)  # unique task ids
    games = []
    for game_seed in seeds:
        civilian_word, spy_word = rng.choice(WORD_PAIRS)
        if rng.random() < 0.5:
            civilian_word, spy_word = spy_word, civilian_word
        games.append({"seed": game_seed, "civilian_word": civilian_word, "spy_word": spy_word,
                      "num_players": NUM_PLAYERS, "num_spies": NUM_SPIES, "max_rounds": MAX_ROUNDS})
    return games


if __name__ == "__main__":
    path = Path(__file__).resolve().parent / "mock_game_dataset.json"
    path.write_text(json.dumps(make_games(), indent=1) + "\n")
    print(f"wrote {NUM_TASKS} games to {path}")
