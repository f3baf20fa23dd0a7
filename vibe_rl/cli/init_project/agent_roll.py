"""Training loop: self-play games of race to ten against swarm server server1, grpo_n games per seed.

Batch size and group size come from the job the server really runs (`swarm.job`): on a CPU machine
`vibe-rl run` caps them, and its notes say the values.
"""

import itertools
import os
from pathlib import Path

from vibe_rl.swarm import SwarmClient, TrainJob, run_in_flight

from agent_run import play_game

HERE = Path(__file__).resolve().parent
SWARM_URL = os.getenv("VIBE_RL_SWARM_URL", "http://127.0.0.1:10086")


def main() -> None:
    swarm = SwarmClient(SWARM_URL)
    swarm.auto_sync_train_config_and_start_engine(TrainJob.from_yaml(HERE / "config.yaml"))
    job = swarm.job

    def one_game(seed: int) -> None:
        game = play_game(swarm, seed)
        print(f"seed {seed}: winner seat {game.winner} (forfeit: {game.forfeit}, moves: {len(game.history)})",
              flush=True)

    # Each seed (one start position) is played grpo_n times: tasks `<seed>-0` and `<seed>-1` get grpo_n episodes.
    games = (seed for seed in itertools.count(1) for _ in range(job.grpo_n))
    run_in_flight(one_game, games, max_in_flight=job.batch_size * job.grpo_n)


if __name__ == "__main__":
    main()
