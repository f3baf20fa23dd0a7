"""The swarm: a training server per trainable model, and its light client.

    client/    what a project's roll script imports: SwarmClient, AsyncSwarmClient, episodes,
               routing of roles to models, the task schedule, GRPO groups and
               the loop over them, play_groups (no torch, no uvicorn)
    server/    the training server: build_app, the front door and its route table, serving, the pool, the store, the trainer
    observe/   seeing training: metrics and loggers, curves, traces and their viewer, overwatch
    protocol   the wire models both sides speak; auth: the admin token's files, read by both sides;
    launch     spawn a server process, wait for /healthz, stop it

Importing this package is light (no torch, no uvicorn): a generated project's
`agent_roll.py` needs only the client, whose public names are re-exported here.
The server is `vibe_rl.swarm.server.app`.
"""

from vibe_rl.schema import OpenaiBaseUrlAndApiKey, Task, TrainJob, WorkflowOutput
from vibe_rl.schema.task_data import TaskColumns, load_tasks
from vibe_rl.swarm.client.async_client import AsyncEpisode, AsyncSwarmClient
from vibe_rl.swarm.client.async_episodes import AsyncEpisodes, open_async_episodes
from vibe_rl.swarm.client.episodes import Episode, Episodes, NotAnEpisodeError, open_episodes
from vibe_rl.swarm.client.groups import Group, play_groups, schedule_groups
from vibe_rl.swarm.client.inflight import InFlightReport, run_in_flight
from vibe_rl.swarm.client.routing import LLMRouter, RoleLLM
from vibe_rl.swarm.client.schedule import schedule, split_held_out
from vibe_rl.swarm.client.sync_client import SwarmClient, SwarmHTTPError

__all__ = [
    "AsyncEpisode",
    "AsyncEpisodes",
    "AsyncSwarmClient",
    "Episode",
    "Episodes",
    "Group",
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
    "open_async_episodes",
    "open_episodes",
    "play_groups",
    "run_in_flight",
    "schedule",
    "schedule_groups",
    "split_held_out",
]
