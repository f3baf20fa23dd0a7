"""Write mock_translation_dataset.json: 200 tasks drawn from the curated paragraphs in
mock_paragraphs.json, each with a unique seed (the task_id).

A paragraph appears under several seeds so that one epoch holds more distinct tasks (GRPO groups) than a
batch needs. Run `python mock_dataset.py` to regenerate; the output is deterministic.
"""

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
NUM_TASKS = 200


def load_paragraphs() -> list[dict]:
    return json.loads((HERE / "mock_paragraphs.json").read_text(encoding="utf-8"))["paragraphs"]


def make_tasks(num_tasks: int = NUM_TASKS, seed: int = 2026) -> list[dict]:
    rng = random.Random(seed)
    paragraphs = load_paragraphs()
    seeds = rng.sample(range(100_000, 1_000_000), num_tasks)  # unique task ids
    return [{"seed": task_seed, **paragraphs[i % len(paragraphs)]} for i, task_seed in enumerate(seeds)]


if __name__ == "__main__":
    path = HERE / "mock_translation_dataset.json"
    path.write_text(json.dumps(make_tasks(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {NUM_TASKS} tasks to {path}")
