"""One adversarial Who-is-Spy episode (agent_roll_adv mode).

Civilians play on swarm server server1, spies on swarm server server2; each server is rewarded for its own team.
"""

from vibe_rl.swarm import OpenaiBaseUrlAndApiKey, Task, WorkflowOutput

from agent_run import output, play

# Team wiring: role -> the server its calls reach. `vibe-rl doctor` checks it.
TEAM_MODELS = {"civilian": "server1", "spy": "server2"}


def run_episode_adv(task: Task, endpoints: dict[str, OpenaiBaseUrlAndApiKey],
                    seed: int | None = None) -> dict[str, WorkflowOutput]:
    """endpoints: server -> its episode credentials. Returns server -> its team's output."""
    game = play(task, endpoints, TEAM_MODELS, seed=seed)
    return {"server1": output(game, "civilian"),
            "server2": output(game, "spy")}
