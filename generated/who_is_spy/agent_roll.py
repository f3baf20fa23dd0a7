"""Training loop (agent_roll): the mock tasks, grpo_n episodes each, against swarm server server1.

task_id is the game's seed: unique per task, never empty, shared by the grpo_n episodes of one GRPO group.
Batch size and group size come from config.yaml; the server updates the weights on its own.
"""

import argparse
import json
import os
from pathlib import Path

from vibe_rl.swarm import SwarmClient, Task, TrainJob, run_in_flight, schedule, split_held_out

from agent_run import run_episode

HERE = Path(__file__).resolve().parent
SWARM_URL = os.getenv("VIBE_RL_SWARM_URL", "http://127.0.0.1:10086")
CONFIG = HERE / "config.yaml"
DISCARD_EPISODE_TIMEOUT = 600  # seconds an episode may stay idle before the server drops it


def load_tasks() -> list[Task]:
    games = json.loads((HERE / "mock_game_dataset.json").read_text())
    return [Task(task_id=str(game["seed"]), main_query=f"{game['civilian_word']} / {game['spy_word']}", metadata=game)
            for game in games]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eval", type=int, default=0, metavar="N", help="hold out the last N tasks; play them as eval "
                    "episodes (logged as eval/*, never trained on) at the start and every --eval-every updates")
    ap.add_argument("--eval-every", type=int, default=5, metavar="K", help="weight updates between eval rounds")
    args = ap.parse_args()
    swarm = SwarmClient(SWARM_URL)
    swarm.auto_sync_train_config_and_start_engine(TrainJob.from_yaml(CONFIG))
    job = swarm.job  # what the server runs: its --model/--set overrides win (e.g. small batches on CPU)
    tasks, held_out = split_held_out(load_tasks(), args.eval)

    def rollout(item: tuple[Task, bool]) -> None:
        task, is_eval = item
        with swarm.episode(task, timeout=DISCARD_EPISODE_TIMEOUT, eval=is_eval) as ep:  # aborted if the game raises
            output = run_episode(task, ep.credentials)
            ep.end(output)
        print(f"{'eval ' * is_eval}task {task.task_id}: reward {output.reward} winner {output.metadata['winner']}",
              flush=True)

    # Endless epochs over the training tasks, each played grpo_n times (one GRPO group); with --eval N the last
    # N tasks are held out and played as eval episodes every --eval-every updates.
    episodes = schedule(tasks, job.grpo_n, held_out, args.eval_every, step=lambda: swarm.status().global_step)
    run_in_flight(rollout, episodes, max_in_flight=job.batch_size * job.grpo_n)


if __name__ == "__main__":
    main()
