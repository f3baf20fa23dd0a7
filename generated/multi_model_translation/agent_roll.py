"""Training loop (agent_roll): the mock paragraphs, grpo_n episodes each, on 2 swarm servers.

Every task opens one episode on each server (open_episodes), runs the three agents once, and reports to
each server the reward of its own grader. task_id is the task's seed: unique, never empty, the GRPO group
key on every server. Batch sizes and the group size come from each server's config (or the server's overrides).
"""

import argparse
import json
import os
from pathlib import Path

from vibe_rl.swarm import SwarmClient, Task, TrainJob, open_episodes, run_in_flight, schedule, split_held_out

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eval", type=int, default=0, metavar="N", help="hold out the last N tasks; play them as eval "
                    "episodes (logged as eval/*, never trained on) at the start and every --eval-every updates")
    ap.add_argument("--eval-every", type=int, default=5, metavar="K", help="weight updates between eval rounds")
    args = ap.parse_args()
    swarms = {name: SwarmClient(url) for name, (url, _) in SERVERS.items()}
    for name, swarm in swarms.items():
        swarm.auto_sync_train_config_and_start_engine(TrainJob.from_yaml(SERVERS[name][1]))
    # Size the loop by what the servers run: their --model/--set overrides win (e.g. small batches on CPU).
    grpo_n = {swarm.job.grpo_n for swarm in swarms.values()}
    if len(grpo_n) != 1:
        raise SystemExit(f"Every server groups the same episodes, so grpo_n must match on all servers: {grpo_n}")
    grpo_n = grpo_n.pop()
    tasks, held_out = split_held_out(load_tasks(), args.eval)

    def rollout(item: tuple[Task, bool]) -> None:
        task, is_eval = item
        with open_episodes(swarms, task, timeout=DISCARD_EPISODE_TIMEOUT, eval=is_eval) as eps:  # aborted on errors
            outputs = run_episode(task, {name: ep.credentials for name, ep in eps.items()})
            eps.end(outputs)
        rewards = ", ".join(f"{name} {out.reward:.2f}" for name, out in outputs.items())
        print(f"{'eval ' * is_eval}task {task.task_id}: rewards {rewards}", flush=True)

    # Endless epochs over the training tasks, each played grpo_n times (one GRPO group); with --eval N the last
    # N tasks are held out and played as eval episodes every --eval-every updates.
    first = next(iter(swarms.values()))
    episodes = schedule(tasks, grpo_n, held_out, args.eval_every, step=lambda: first.status().global_step)
    batch = max(swarm.job.batch_size for swarm in swarms.values())
    run_in_flight(rollout, episodes, max_in_flight=min(MAX_PARALLEL, batch * grpo_n))


if __name__ == "__main__":
    main()
