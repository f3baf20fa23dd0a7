"""Training loop (agent_roll): the mock paragraphs, grpo_n episodes each, on 2 swarm servers.

Every task is one GRPO group on each server: each play opens one episode on every server (play_groups), runs
the three agents once, and reports to each server the reward of its own grader. The group key is the task's
seed. Batch sizes and the group size come from each server's config (or the server's overrides).
"""

import argparse
import json
import os
from pathlib import Path

from vibe_rl.swarm import Group, SwarmClient, Task, TrainJob, WorkflowOutput, play_groups, split_held_out

from agent_run import run_episode

HERE = Path(__file__).resolve().parent
SERVERS = {  # server -> (URL, TrainJob config)
    "server1": (os.getenv("VIBE_RL_SWARM_URL", "http://127.0.0.1:10086"), HERE / "config.yaml"),
    "server2": (os.getenv("VIBE_RL_SWARM_URL_2", "http://127.0.0.1:10087"), HERE / "config_server2.yaml"),
}
DISCARD_EPISODE_TIMEOUT = 240  # seconds an episode may stay idle before the server drops it
MAX_PARALLEL = 64  # tasks in flight at most


def load_tasks() -> list[Task]:
    records = json.loads((HERE / "mock_translation_dataset.json").read_text(encoding="utf-8"))
    return [Task(task_id=str(r["seed"]), main_query=r["source"], metadata=r) for r in records]


def show(group: Group, outputs: dict[str, WorkflowOutput]) -> None:
    rewards = ", ".join(f"{name} {out.reward:.2f}" for name, out in outputs.items())
    print(f"{'eval ' * group.eval}task {group.task.task_id}: rewards {rewards}", flush=True)


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
    # Endless epochs over the training tasks, one group each (play_groups checks that every server's job has the
    # same grpo_n); with --eval N the last N tasks are played as eval episodes every --eval-every updates.
    groups = next(iter(swarms.values())).groups(tasks, held_out, args.eval_every)
    play_groups(swarms, groups, run_episode, timeout=DISCARD_EPISODE_TIMEOUT, max_in_flight=MAX_PARALLEL, on_end=show)


if __name__ == "__main__":
    main()
