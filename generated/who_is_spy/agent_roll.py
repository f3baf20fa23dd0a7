"""Training loop (agent_roll): the mock tasks, grpo_n episodes each, against swarm server server1.

Each task is one GRPO group (swarm.groups): grpo_n plays of it, keyed by its task_id, the game's seed.
Batch size and group size come from config.yaml; the server updates the weights on its own.
"""

import argparse
import json
import os
from pathlib import Path

from vibe_rl.swarm import Group, SwarmClient, Task, TrainJob, WorkflowOutput, play_groups, split_held_out

from agent_run import run_episode

HERE = Path(__file__).resolve().parent
SWARM_URL = os.getenv("VIBE_RL_SWARM_URL", "http://127.0.0.1:10086")
CONFIG = HERE / "config.yaml"
DISCARD_EPISODE_TIMEOUT = 600  # seconds an episode may stay idle before the server drops it


def load_tasks() -> list[Task]:
    games = json.loads((HERE / "mock_game_dataset.json").read_text())
    return [Task(task_id=str(game["seed"]), main_query=f"{game['civilian_word']} / {game['spy_word']}", metadata=game)
            for game in games]


def show(group: Group, output: WorkflowOutput) -> None:
    print(f"{'eval ' * group.eval}task {group.task.task_id}: reward {output.reward} winner {output.metadata['winner']}",
          flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eval", type=int, default=0, metavar="N", help="hold out the last N tasks; play them as eval "
                    "episodes (logged as eval/*, never trained on) at the start and every --eval-every updates")
    ap.add_argument("--eval-every", type=int, default=5, metavar="K", help="weight updates between eval rounds")
    args = ap.parse_args()
    swarm = SwarmClient(SWARM_URL)
    swarm.auto_sync_train_config_and_start_engine(TrainJob.from_yaml(CONFIG))
    tasks, held_out = split_held_out(load_tasks(), args.eval)
    # Endless epochs over the training tasks, one group each, sized by the job the server runs (its --model/--set
    # overrides win); with --eval N the last N tasks are played as eval episodes every --eval-every updates.
    groups = swarm.groups(tasks, held_out, args.eval_every)
    play_groups(swarm, groups, run_episode, timeout=DISCARD_EPISODE_TIMEOUT, on_end=show)


if __name__ == "__main__":
    main()
