"""One adversarial Who-is-Spy episode (agent_roll_adv mode).

Civilians play on swarm server server1, spies on swarm server server2; each server is rewarded for its own team.
"""

from vibe_rl.swarm import OpenaiBaseUrlAndApiKey, Task, WorkflowOutput

from agent_run import output, play

# Team wiring: role -> the server its calls reach. `vibe-rl doctor` checks it.
TEAM_MODELS = {"civilian": "server1", "spy": "server2"}


def run_episode_adv(task: Task, creds_1: OpenaiBaseUrlAndApiKey, creds_2: OpenaiBaseUrlAndApiKey,
                    seed: int | None = None) -> tuple[WorkflowOutput, WorkflowOutput]:
    """Returns (output for server1, output for server2)."""
    endpoints = {"server1": creds_1, "server2": creds_2}
    game = play(task, endpoints, TEAM_MODELS, seed=seed)
    return (output(game, "civilian"),
            output(game, "spy"))
