"""The swarm: a training server per trainable model, and its light client.

Importing this package is light (no torch, no fastapi): a generated project's
`agent_roll.py` needs only the client. The server lives in `vibe_rl.swarm.app`.
"""

from vibe_rl.schema import OpenaiBaseUrlAndApiKey, Task, TrainJob, WorkflowOutput
from vibe_rl.schema.task_data import TaskColumns, load_tasks
from vibe_rl.swarm.async_client import AsyncEpisode, AsyncSwarmClient
from vibe_rl.swarm.client import InFlightReport, SwarmClient, SwarmHTTPError, run_in_flight
from vibe_rl.swarm.episodes import Episode, Episodes, LLMRouter, NotAnEpisodeError, RoleLLM, open_episodes
from vibe_rl.swarm.schedule import schedule, split_held_out

__all__ = [
    "AsyncEpisode",
    "AsyncSwarmClient",
    "Episode",
    "Episodes",
    "InFlightReport",
    "LLMRouter",
    "NotAnEpisodeError",
    "OpenaiBaseUrlAndApiKey",
    "RoleLLM",
    "SwarmClient",
    "SwarmHTTPError",
    "Task",
    "TaskColumns",
    "TrainJob",
    "WorkflowOutput",
    "load_tasks",
    "open_episodes",
    "run_in_flight",
    "schedule",
    "split_held_out",
]
