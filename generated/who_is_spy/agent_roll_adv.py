"""Adversarial training loop (agent_roll_adv): two swarm servers, one model per team.

Each game opens one episode on each server (open_episodes); each server gets its own team's reward.
task_id is the game's seed: unique per task, never empty, the GRPO group key on both servers.
"""

import argparse
import json
import os
from pathlib import Path

from vibe_rl.swarm import SwarmClient, Task, TrainJob, open_episodes, run_in_flight, schedule, split_held_out

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eval", type=int, default=0, metavar="N", help="hold out the last N tasks; play them as eval "
                    "episodes (logged as eval/*, never trained on) at the start and every --eval-every updates")
    ap.add_argument("--eval-every", type=int, default=5, metavar="K", help="weight updates between eval rounds")
    args = ap.parse_args()
    swarms = {name: SwarmClient(url) for name, (url, _) in SERVERS.items()}
    for name, swarm in swarms.items():
        swarm.auto_sync_train_config_and_start_engine(TrainJob.from_yaml(SERVERS[name][1]))
    jobs = [swarm.job for swarm in swarms.values()]  # what the servers run: their --model/--set overrides win
    tasks, held_out = split_held_out(load_tasks(), args.eval)

    def rollout(item: tuple[Task, bool]) -> None:
        task, is_eval = item
        with open_episodes(swarms, task, timeout=DISCARD_EPISODE_TIMEOUT, eval=is_eval) as eps:  # aborted on errors
            outputs = run_episode_adv(task, eps["server1"].credentials, eps["server2"].credentials)
            eps.end(dict(zip(eps, outputs, strict=True)))
        print(f"{'eval ' * is_eval}task {task.task_id}: winner {outputs[0].metadata['winner']}", flush=True)

    # Both servers share the group size; the larger batch keeps both pools fed.
    # Endless epochs over the training tasks, each played grpo_n times (one GRPO group); with --eval N the last
    # N tasks are held out and played as eval episodes every --eval-every updates.
    grpo_n, first = jobs[0].grpo_n, next(iter(swarms.values()))
    episodes = schedule(tasks, grpo_n, held_out, args.eval_every, step=lambda: first.status().global_step)
    run_in_flight(rollout, episodes, max_in_flight=max(job.batch_size for job in jobs) * grpo_n)


if __name__ == "__main__":
    main()
