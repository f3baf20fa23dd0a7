"""Episodes as context managers (routing each game role to its model is `routing.py`).

    with swarm.episode(task, timeout=600) as ep:          # one server
        reply = ep.openai().chat.completions.create(model=ep.model, messages=..., user="spy:player_3")
        ep.end(reward, {"winner": "spy"})

    with open_episodes({"server1": swarm_1, "server2": swarm_2}, task) as eps:   # several servers
        llm_for = LLMRouter(TEAM_MODELS, eps).llm_for       # role -> RoleLLM (client + model name)
        ...
        eps.end({"server1": output_1, "server2": output_2})

`eps.end` of episodes on several servers is atomic: a two-phase end (`twophase.py`; the protocol is
`vibe_rl.swarm.server.txn`) records the game on every server or on none, even if the client dies meanwhile.

Leaving the `with` block by an exception aborts every episode still open (an
episode that the server already dropped is not an error, and its 410 is logged at
debug level only) and re-raises; an episode already ended stays stored and is
trained, so code that can fail belongs before `end`. Leaving the block without
ending an episode aborts it too, and raises SwarmError: a reward that was never
reported is a bug in the client, not something to skip silently.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from vibe_rl.errors import ConfigError, SwarmError
from vibe_rl.extras import require
from vibe_rl.schema import OpenaiBaseUrlAndApiKey, Task, WorkflowOutput
from vibe_rl.swarm.client.outputs import checked_outputs, end_output

if TYPE_CHECKING:
    from vibe_rl.swarm.protocol import EndEpisodeResponse

log = logging.getLogger("vibe_rl.swarm.episodes")


class EpisodeServer(Protocol):
    """What an episode needs of its server's client (SwarmClient fits): begin, end and abort an episode."""

    def begin(self, task: Task, timeout: float | None = None, eval: bool = False,
              group: str | None = None) -> Episode: ...

    def end_episode(self, task: Task, episode_uuid: str, output: WorkflowOutput) -> dict[str, Any]: ...

    def abort_episode(self, episode_uuid: str) -> dict[str, Any]: ...


class EpisodeCredentials:
    """What an open episode holds, sync or async: its client, uuid, OpenAI credentials, task, kind and GRPO group
    key (None: the task_id), and one openai SDK client made on first use (`OPENAI_CLASS`: 'OpenAI' or
    'AsyncOpenAI')."""

    OPENAI_CLASS = "OpenAI"

    def __init__(self, client: Any, uuid: str, credentials: OpenaiBaseUrlAndApiKey, task: Task, kind: str = "train",
                 group: str | None = None):
        self.client, self.uuid, self.credentials, self.task, self.kind = client, uuid, credentials, task, kind
        self.group = group
        self.base_url, self.api_key, self.model = credentials.base_url, credentials.api_key, credentials.model
        self.closed = False
        self._openai: Any = None

    def openai(self, max_retries: int = 3) -> Any:
        """An openai SDK client for this episode (made once, then reused)."""
        if self._openai is None:
            openai = require("openai", "calling the episode's model with the openai SDK")
            self._openai = getattr(openai, self.OPENAI_CLASS)(base_url=self.base_url, api_key=self.api_key,
                                                              max_retries=max_retries)
        return self._openai


class Episode(EpisodeCredentials):
    """One open episode on one server: its OpenAI credentials, then `end(reward)` or `abort()`."""

    client: EpisodeServer

    def end(self, reward: float | WorkflowOutput, metadata: dict[str, Any] | None = None) -> EndEpisodeResponse:
        """Report the reward (a number and optional metadata, or a WorkflowOutput that holds both); the server
        stores the episode before answering. Repeating it with the same reward is harmless (`already_ended` is
        then true). A WorkflowOutput together with `metadata` is a ConfigError (the metadata would be lost)."""
        from vibe_rl.swarm.protocol import EndEpisodeResponse

        output = end_output(reward, metadata)
        result = EndEpisodeResponse.model_validate(self.client.end_episode(self.task, self.uuid, output))
        self.closed = True
        return result

    def abort(self) -> None:
        """Drop the episode (nothing is trained on it). An episode the server already dropped is fine, and
        an unreachable server is only logged: it discards the episode once its idle timeout passes."""
        if self.closed:
            return
        self.closed = True
        try:
            result = self.client.abort_episode(self.uuid)
        except SwarmError as exc:  # gone already (410/404), or the server is unreachable
            log_failed_abort(self.uuid, exc)
            return
        log_aborted(self.uuid, result)


def log_aborted(episode_uuid: str, result: Any) -> None:
    """An abort of a prepared episode (twophase.py) whose game had prepared everywhere committed instead."""
    if isinstance(result, dict) and result.get("outcome") == "committed":
        log.warning("episode %s was not aborted: every episode of its game had prepared, so the game "
                    "committed on every server", episode_uuid)


def log_failed_abort(episode_uuid: str, exc: Exception) -> None:
    """An abort that failed is only logged: 410 (the server already dropped it: discarded, ended; the caller's own
    error says why) at debug level, anything else (e.g. an unreachable server, which discards it after its idle
    timeout) as a warning."""
    level = logging.DEBUG if getattr(exc, "status", None) == 410 else logging.WARNING
    log.log(level, "abort of episode %s: %s", episode_uuid, exc)


class Episodes(dict[str, Episode]):
    """Episodes opened together (one per server, or per team), by name; see `open_episodes`."""

    def end(self, outputs: Mapping[str, float | WorkflowOutput]) -> dict[str, EndEpisodeResponse]:
        """End every episode with its own output; a name without an output is an error (nothing is sent).
        Episodes on several servers end together, in two phases (`twophase.end_together`): the game is
        recorded on every server or on none; on one server each ends in one step."""
        checked = checked_outputs(self, outputs)
        from vibe_rl.swarm.client import twophase

        if len({twophase.server_of(ep) for ep in self.values()}) > 1:
            if twophase.can_end_together(self):
                return twophase.end_together(self, checked)
            log.warning("eps.end: a client of these episodes has no prepare_episode/commit_episode, so they end "
                        "one after the other (not atomically)")
        return {name: episode.end(checked[name]) for name, episode in self.items()}


@contextlib.contextmanager
def _closing(episodes: list[Episode]) -> Iterator[None]:
    try:
        yield
    except BaseException:
        for ep in episodes:
            ep.abort()
        raise
    open_ones = [ep for ep in episodes if not ep.closed]
    for ep in open_ones:
        ep.abort()
    if open_ones:
        raise SwarmError(f"{len(open_ones)} episode(s) left the `with` block without end(reward) (task "
                         f"{open_ones[0].task.task_id}); they were aborted. Call ep.end(reward) (or ep.abort()) "
                         "inside the block.")


class NotAnEpisodeError(SwarmError, AttributeError, TypeError):
    """`swarm.episode(task)` / `open_episodes(...)` used as the episode itself, without `with`."""


class _Block(contextlib.AbstractContextManager):
    """The context manager `swarm.episode` / `open_episodes` return. Nothing begins until `with` enters it, so
    code that uses it as the episode itself (`ep = swarm.episode(task); ep.openai()`) gets an error saying so."""

    def __init__(self, manager: Any, what: str, instead: str):
        self._manager, self._what, self._instead = manager, what, instead

    def __enter__(self) -> Any:
        return self._manager.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        return self._manager.__exit__(*exc)

    async def __aenter__(self) -> Any:
        raise NotAnEpisodeError(f"{self._what} is SwarmClient's, for a plain `with`; nothing has begun. asyncio code "
                                "uses AsyncSwarmClient: `async with swarm.episode(task)` / `async with "
                                "open_async_episodes(...)`.")

    async def __aexit__(self, *exc: Any) -> None:
        return None

    def _misuse(self, name: str) -> NotAnEpisodeError:
        return NotAnEpisodeError(f"{self._what} is a context manager, not the episode (asked for {name}); nothing has "
                          f"begun. Write `with {self._what} as ep:` ... `ep.end(reward)`, or {self._instead}.")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        raise self._misuse(f".{name}")

    def __getitem__(self, key: Any) -> Any:
        raise self._misuse(f"[{key!r}]")


@contextlib.contextmanager
def _open_episode(client: EpisodeServer, task: Task, timeout: float | None = None, eval: bool = False,
                  group: str | None = None) -> Iterator[Episode]:
    if not isinstance(task, Task):
        task = Task.model_validate(task)
    ep = client.begin(task, timeout=timeout, eval=eval, group=group)
    with _closing([ep]):
        yield ep


def open_episode(client: EpisodeServer, task: Task, timeout: float | None = None, eval: bool = False,
                 group: str | None = None) -> contextlib.AbstractContextManager[Episode]:
    """`SwarmClient.episode`: begin an episode of `task`, yield it, abort it on an exception."""
    return _Block(_open_episode(client, task, timeout=timeout, eval=eval, group=group), "swarm.episode(task)",
                  "`ep = swarm.begin(task)` to end or abort it yourself")


def open_episodes(servers: Mapping[str, EpisodeServer], task: Task | Mapping[str, Task], timeout: float | None = None,
                  eval: bool = False, group: str | None = None) -> contextlib.AbstractContextManager[Episodes]:
    """One episode per name in `servers` (the same client may appear under several names, e.g. one episode
    per team), all of `task` or each of its own task (`{name: Task}`); aborted together on an exception.
    `group`: the GRPO group key (default: each episode's task_id); see `group_keys` for one server's teams."""
    return _Block(_open_episodes(servers, task, timeout=timeout, eval=eval, group=group), "open_episodes(...)",
                  "one `swarm.begin(task)` per episode to end or abort each yourself")


def group_keys(servers: Mapping[str, EpisodeServer], tasks: Mapping[str, Task],
               group: str | None) -> dict[str, str | None]:
    """Each name's GRPO group key: `group`, else its task's task_id (None: the server takes the task_id).
    Episodes on one server under one key would mix in one GRPO group (two teams' plays compared as one),
    so each of those is pooled under `<key>/<name>`, e.g. "7/werewolves" and "7/seer"."""
    base = {name: group or tasks[name].task_id for name in servers}
    mixed = {name for name, client in servers.items()
             if any(other != name and servers[other] is client and base[other] == base[name] for other in servers)}
    return {name: f"{base[name]}/{name}" if name in mixed else group for name in servers}


def game_tasks(servers: Mapping[str, Any], task: Task | Mapping[str, Task], group: str | None,
               coroutines: bool = False) -> tuple[dict[str, Task], dict[str, str | None]]:
    """Each name's task and GRPO group key (`group_keys`), checked before any episode begins, as are the clients:
    asyncio ones (`coroutines`: open_async_episodes) or not (open_episodes)."""
    wrong = sorted(name for name, client in servers.items()
                   if inspect.iscoroutinefunction(getattr(client, "begin", None)) != coroutines)
    if wrong:
        raise ConfigError(f"open_async_episodes takes AsyncSwarmClients; {wrong} are not: use `with "
                          "open_episodes(...) as eps:` ... `eps.end(...)` for SwarmClients." if coroutines else
                          f"open_episodes takes SwarmClients; {wrong} are asyncio clients: use `async with "
                          "open_async_episodes(...) as eps:` ... `await eps.end(...)` for AsyncSwarmClients.")
    tasks = task if isinstance(task, Mapping) and not isinstance(task, Task) else dict.fromkeys(servers, task)
    missing = sorted(set(servers) - set(tasks))
    if missing:
        raise ConfigError(f"open_episodes got no task for {missing}; pass one Task, or one per name in "
                          f"{sorted(servers)}.")
    tasks = {name: t if isinstance(t, Task) else Task.model_validate(t) for name, t in tasks.items()}
    return tasks, group_keys(servers, tasks, group)


@contextlib.contextmanager
def _open_episodes(servers: Mapping[str, EpisodeServer], task: Task | Mapping[str, Task], timeout: float | None = None,
                   eval: bool = False, group: str | None = None) -> Iterator[Episodes]:
    tasks, keys = game_tasks(servers, task, group)
    opened = Episodes()
    try:
        for name, client in servers.items():
            opened[name] = client.begin(tasks[name], timeout=timeout, eval=eval, group=keys[name])
    except BaseException:
        for ep in opened.values():
            ep.abort()
        raise
    with _closing(list(opened.values())):
        yield opened
