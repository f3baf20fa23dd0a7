"""GRPO groups as values, and the one loop a roll script runs over them.

    swarm.auto_sync_train_config_and_start_engine(job)
    groups = swarm.groups(tasks, held_out, eval_every=5)       # endless: each task's group of job.grpo_n plays
    play_groups(swarm, groups, run_episode, timeout=600)      # run_episode(task, credentials) -> WorkflowOutput

A `Group` is n episodes of one task pooled under one GRPO group key, `key`, which is the task's task_id
unless given apart (`swarm.group(task, key="7-hard")`): the key travels in the begin request, so the task
itself is stored as it is. A server groups by the task_id when a begin names no group (how clients written
for AgentJet's swarm group). Eval groups (`eval=True`) are played by the current weights, logged as eval/*
and never trained on.

`play_groups` is the begin / play / end / abort-on-error block of every roll script, kept in flight:
`play(task, credentials)` plays one episode and returns its WorkflowOutput (with a mapping of servers,
`play(task, {name: credentials})` returns `{name: WorkflowOutput}`); an exception aborts the episode(s)
and the item is retried, as `run_in_flight` does. Several episodes on one server (one per team) would mix
in one GRPO group, so each of them is pooled under `<key>/<name>` (e.g. "7/werewolves"); episodes on
different servers share the key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vibe_rl.errors import ConfigError
from vibe_rl.schema import Task, TrainJob, WorkflowOutput
from vibe_rl.swarm.client.episodes import open_episodes
from vibe_rl.swarm.client.inflight import InFlightReport, run_in_flight
from vibe_rl.swarm.client.schedule import schedule


@dataclass(frozen=True)
class Group:
    """`n` episodes of `task`, pooled under the GRPO group key `key` (eval: played, logged, never trained on)."""

    task: Task
    n: int
    key: str
    eval: bool = False

    @classmethod
    def of(cls, task: Task | dict, n: int, key: str | None = None, eval: bool = False) -> Group:
        """The group of `n` plays of `task`; `key` defaults to its task_id."""
        task = task if isinstance(task, Task) else Task.model_validate(task)
        if n < 1:
            raise ConfigError(f"A group needs at least one episode, got n={n} (task {task.task_id}).")
        if key is not None and not key:
            raise ConfigError(f"A group key must not be empty (task {task.task_id}); leave it out to use the task_id.")
        return cls(task, n, key or task.task_id, eval)


def schedule_groups(tasks: Sequence[Task], n: int, held_out: Sequence[Task] = (), eval_every: int = 0,
                    step: Callable[[], int] | None = None) -> Iterator[Group]:
    """`schedule`'s stream as Groups, forever: each training task's group of `n`, epoch after epoch, and each
    held-out task as an eval group of one at the start and every `eval_every` steps of `step()`."""
    plays = schedule(tasks, 1, held_out, eval_every, step)
    for task, is_eval in plays:
        yield Group.of(task, 1 if is_eval else n, eval=is_eval)


def job_of(servers: Any) -> TrainJob:
    """The job the server(s) run (`auto_sync_train_config_and_start_engine` sets it); one grpo_n on all."""
    clients = list(servers.values()) if isinstance(servers, Mapping) else [servers]
    jobs = [client.job for client in clients]
    if any(job is None for job in jobs):
        raise ConfigError("The loop is sized by the job each server runs: call "
                          "swarm.auto_sync_train_config_and_start_engine(job) on every server first.")
    if len({job.grpo_n for job in jobs}) != 1:
        raise ConfigError(f"Every server pools the same groups, so grpo_n must match on all servers: "
                          f"{sorted({job.grpo_n for job in jobs})}.")
    return max(jobs, key=lambda job: job.batch_size)


def _episodes(groups: Iterable[Group], grpo_n: int) -> Iterator[Group]:
    for group in groups:
        if not group.eval and group.n != grpo_n:  # never fills (n < grpo_n) or spills into a second group
            raise ConfigError(f"Group {group.key!r} has {group.n} episodes but the server trains groups of "
                              f"grpo_n={grpo_n}; build it with swarm.group(task) (n = job.grpo_n).")
        yield from (group for _ in range(group.n))


Play = Callable[[Task, Any], Any]


def play_groups(servers: Any, groups: Iterable[Group], play: Play, timeout: float | None = None,
                max_in_flight: int | None = None, on_end: Callable[[Group, Any], None] | None = None,
                max_retries: int = 2) -> InFlightReport:
    """Play every episode of `groups` (which may be endless) on `servers` (a SwarmClient, or `{name: client}`
    for one episode per name), at most `max_in_flight` at once (and never more than batch_size * grpo_n, what
    one update takes). `on_end(group, output)` runs after each episode ended. Returns run_in_flight's report."""
    job = job_of(servers)
    in_flight = min(max_in_flight or job.batch_size * job.grpo_n, job.batch_size * job.grpo_n)

    def episode(group: Group) -> None:
        output = play_one(servers, group, play, timeout)
        if on_end is not None:
            on_end(group, output)

    return run_in_flight(episode, _episodes(groups, job.grpo_n), max_in_flight=in_flight, max_retries=max_retries)


def play_one(servers: Any, group: Group, play: Play, timeout: float | None = None) -> Any:
    """One episode of `group` (one per name with a mapping of servers): begin, play, end; aborted if play raises."""
    if isinstance(servers, Mapping):
        with open_episodes(servers, group.task, timeout=timeout, eval=group.eval, group=group.key) as eps:
            outputs: dict[str, WorkflowOutput] = play(group.task, {name: ep.credentials for name, ep in eps.items()})
            eps.end(outputs)
        return outputs
    with servers.episode(group.task, timeout=timeout, eval=group.eval, group=group.key) as ep:
        output: WorkflowOutput = play(group.task, ep.credentials)
        ep.end(output)
    return output
