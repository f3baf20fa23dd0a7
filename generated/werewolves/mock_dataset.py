"""Write mock_game_dataset.json: 200 games, each with a unique seed (the task_id).

The seed fixes the seating and the deal of the roles; ids and names are drawn again every episode.
Run `python mock_dataset.py` to regenerate; the output is deterministic.
"""

import json
import random
from pathlib import Path

NUM_TASKS = 200


def make_games(num_tasks: int = NUM_TASKS, seed: int = 2025) -> list[dict]:
    rng = random.Random(seed)
    seeds = rng.sample(range(100_000, 1_000_000), num_tasks)  # unique task ids
    return [{"seed": game_seed, "win_rule": "parity", "max_days": 12} for game_seed in seeds]


if __name__ == "__main__":
    path = Path(__file__).resolve().parent / "mock_game_dataset.json"
    path.write_text(json.dumps(make_games(), indent=1) + "\n")
    print(f"wrote {NUM_TASKS} games to {path}")
