"""Adversarial training loop (agent_roll_adv): two swarm servers, one model per team.

Each game opens one episode on each server (two begin/end pairs); each server gets its own team's reward.
task_id is the game's seed: unique per task, never empty, the GRPO group key on both servers.
"""

import itertools
import json
import os
from pathlib import Path

from vibe_rl.swarm import SwarmClient, Task, TrainJob, run_in_flight

from agent_run_adv import run_episode_adv

HERE = Path(__file__).resolve().parent
SWARM_URL_1 = os.getenv("VIBE_RL_SWARM_URL", "http://127.0.0.1:10086")
SWARM_URL_2 = os.getenv("VIBE_RL_SWARM_URL_2", "http://127.0.0.1:10087")
CONFIG_1 = HERE / "config.yaml"
CONFIG_2 = HERE / "config_server2.yaml"
DISCARD_EPISODE_TIMEOUT = 600  # seconds an episode may stay idle before the server drops it


def load_tasks() -> list[Task]:
    games = json.loads((HERE / "mock_game_dataset.json").read_text())
    return [Task(task_id=str(game["seed"]), main_query=f"{game['civilian_word']} / {game['spy_word']}", metadata=game)
            for game in games]


def main() -> None:
    swarm_1, swarm_2 = SwarmClient(SWARM_URL_1), SwarmClient(SWARM_URL_2)
    swarm_1.auto_sync_train_config_and_start_engine(TrainJob.from_yaml(CONFIG_1))
    swarm_2.auto_sync_train_config_and_start_engine(TrainJob.from_yaml(CONFIG_2))
    job_1, job_2 = swarm_1.job, swarm_2.job  # what the servers run: their --model/--set overrides win
    tasks = load_tasks()

    def rollout(task: Task) -> None:
        uuid_1, creds_1 = swarm_1.begin_episode(discard_episode_timeout=DISCARD_EPISODE_TIMEOUT)
        uuid_2, creds_2 = swarm_2.begin_episode(discard_episode_timeout=DISCARD_EPISODE_TIMEOUT)
        try:
            output_1, output_2 = run_episode_adv(task, creds_1, creds_2)
        except Exception:
            swarm_1.abort_episode(uuid_1)
            swarm_2.abort_episode(uuid_2)
            raise
        swarm_1.end_episode(task, uuid_1, output_1)
        swarm_2.end_episode(task, uuid_2, output_2)
        print(f"task {task.task_id}: winner {output_1.metadata['winner']}", flush=True)

    # Both servers share the group size; the larger batch keeps both pools fed.
    grpo_n = job_1.grpo_n
    episodes = (task for _ in itertools.count() for task in tasks for _ in range(grpo_n))
    run_in_flight(rollout, episodes, max_in_flight=max(job_1.batch_size, job_2.batch_size) * grpo_n)


if __name__ == "__main__":
    main()
