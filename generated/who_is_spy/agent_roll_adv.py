"""Adversarial training loop (agent_roll_adv): two swarm servers, one model per team.

Each task is one GRPO group on both servers: each play opens one episode on each server (play_groups), and
each server gets its own team's reward. The group key is the game's seed.
"""

import argparse
import json
import os
from pathlib import Path

from vibe_rl.swarm import Group, SwarmClient, Task, TrainJob, WorkflowOutput, play_groups, split_held_out

from agent_run_adv import run_episode_adv

HERE = Path(__file__).resolve().parent
SERVERS = {  # server -> (URL, TrainJob config)
    "server1": (os.getenv("VIBE_RL_SWARM_URL", "http://127.0.0.1:10086"), HERE / "config.yaml"),
    "server2": (os.getenv("VIBE_RL_SWARM_URL_2", "http://127.0.0.1:10087"), HERE / "config_server2.yaml"),
}
DISCARD_EPISODE_TIMEOUT = 600  # seconds an episode may stay idle before the server drops it


def load_tasks() -> list[Task]:
    games = json.loads((HERE / "mock_game_dataset.json").read_text())
    return [Task(task_id=str(game["seed"]), main_query=f"{game['civilian_word']} / {game['spy_word']}", metadata=game)
            for game in games]


def show(group: Group, outputs: dict[str, WorkflowOutput]) -> None:
    winner = next(iter(outputs.values())).metadata["winner"]
    print(f"{'eval ' * group.eval}task {group.task.task_id}: winner {winner}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eval", type=int, default=0, metavar="N", help="hold out the last N tasks; play them as eval "
                    "episodes (logged as eval/*, never trained on) at the start and every --eval-every updates")
    ap.add_argument("--eval-every", type=int, default=5, metavar="K", help="weight updates between eval rounds")
    args = ap.parse_args()
    swarms = {name: SwarmClient(url) for name, (url, _) in SERVERS.items()}
    for name, swarm in swarms.items():
        swarm.auto_sync_train_config_and_start_engine(TrainJob.from_yaml(SERVERS[name][1]))
    tasks, held_out = split_held_out(load_tasks(), args.eval)
    # Endless epochs over the training tasks, one group each (both servers' jobs share grpo_n; the larger batch
    # keeps both pools fed); with --eval N the last N tasks are played as eval episodes every --eval-every updates.
    groups = swarms["server1"].groups(tasks, held_out, args.eval_every)
    play_groups(swarms, groups, run_episode_adv, timeout=DISCARD_EPISODE_TIMEOUT, on_end=show)


if __name__ == "__main__":
    main()
