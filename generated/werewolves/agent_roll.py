"""Training loop (agent_roll): the mock games, grpo_n episodes each, against swarm server server1.

task_id is the game's seed: unique, never empty. A game opens one episode per trainable team (EPISODE_ROLES);
each is reported under "<seed>-<team>", so a GRPO group compares grpo_n plays of one deal from one side.
Batch size and group size come from config.yaml (or the server's overrides); the server updates
the weights on its own.
"""

import argparse
import json
import os
from pathlib import Path

from vibe_rl.swarm import SwarmClient, Task, TrainJob, open_episodes, run_in_flight, schedule, split_held_out

from agent_run import EPISODE_ROLES, run_episode

HERE = Path(__file__).resolve().parent
SWARM_URL = os.getenv("VIBE_RL_SWARM_URL", "http://127.0.0.1:10086")
CONFIG = HERE / "config.yaml"
DISCARD_EPISODE_TIMEOUT = 240  # seconds an episode may stay idle before the server drops it
MAX_PARALLEL = 64  # games in flight at most


def load_tasks() -> list[Task]:
    games = json.loads((HERE / "mock_game_dataset.json").read_text())
    return [Task(task_id=str(game["seed"]), main_query=f"werewolves game {game['seed']}", metadata=game)
            for game in games]


def team_task(task: Task, team: str) -> Task:
    return Task(task_id=f"{task.task_id}-{team}", main_query=task.main_query, metadata=task.metadata)


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
        teams = {team: swarm for team in EPISODE_ROLES}  # one episode per team, on the same server
        team_tasks = {team: team_task(task, team) for team in EPISODE_ROLES}
        # aborted if the game raises
        with open_episodes(teams, team_tasks, timeout=DISCARD_EPISODE_TIMEOUT, eval=is_eval) as eps:
            outputs = run_episode(task, {team: ep.credentials for team, ep in eps.items()})
            eps.end(outputs)
        info = next(iter(outputs.values())).metadata
        print(f"{'eval ' * is_eval}task {task.task_id}: winner {info['winner']} after {info['days']} day(s)",
              flush=True)

    # Endless epochs over the training tasks, each played grpo_n times (one GRPO group per team); with --eval N
    # the last N tasks are held out and played as eval episodes every --eval-every updates.
    episodes = schedule(tasks, job.grpo_n, held_out, args.eval_every, step=lambda: swarm.status().global_step)
    run_in_flight(rollout, episodes, max_in_flight=min(MAX_PARALLEL, job.batch_size * job.grpo_n))


if __name__ == "__main__":
    main()
