"""Routing each game role to its model: a team table becomes `(openai client, model name)` pairs.

    with open_episodes({"server1": swarm_1, "server2": swarm_2}, task) as eps:
        llm_for = LLMRouter(TEAM_MODELS, eps).llm_for       # role -> RoleLLM (client + model name)
        reply = llm_for("spy").chat(messages, user="spy:player_3")

Game code never spells server ids or model names: the table says which team plays on which
server (or on which static model, forwarded by an episode's server).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any, Protocol

from vibe_rl.errors import SwarmError
from vibe_rl.extras import require


class Endpoint(Protocol):
    """What a router needs of an episode: OpenAI credentials (Episode and OpenaiBaseUrlAndApiKey both fit)."""

    base_url: str
    api_key: str
    model: str


class RoleLLM:
    """The model one role talks to: an OpenAI client and the model name to pass."""

    def __init__(self, client: Any, model: str, role: str):
        self.client, self.model, self.role = client, model, role

    def chat(self, messages: list[dict[str, Any]], user: str, **kwargs: Any) -> Any:
        """One chat call; returns the first choice's message. `user` tags the call, e.g. 'spy:player_3'."""
        reply = self.client.chat.completions.create(model=self.model, messages=messages, user=user, **kwargs)
        return reply.choices[0].message


class LLMRouter:
    """role -> RoleLLM, from a team table such as `{"civilian": "server1", "spy": "qwen-max"}`.

    A target that names an open endpoint (or is listed in `trainable`) is a trainable server: calls use that
    episode's model. Any other target is a static model, called by name through an episode's URL (the
    server forwards it). `episode_for(role)` picks the endpoint a role's calls go through; by default the
    target's own, else the first. One OpenAI client is made per episode key.
    """

    def __init__(self, team_models: Mapping[str, str], endpoints: Mapping[str, Endpoint],
                 trainable: Collection[str] | None = None, episode_for: Callable[[str], str] | None = None,
                 max_retries: int = 3):
        if not endpoints:
            raise SwarmError("LLMRouter needs at least one open episode to route calls through.")
        self.team_models, self.endpoints = dict(team_models), dict(endpoints)
        self.trainable = set(trainable) if trainable is not None else set(self.endpoints)
        self.episode_for = episode_for or (lambda role: self.team_models[role] if self.team_models[role] in
                                           self.endpoints else next(iter(self.endpoints)))
        self.max_retries = max_retries
        self._clients: dict[str, Any] = {}

    def llm_for(self, role: str) -> RoleLLM:
        if role not in self.team_models:
            raise SwarmError(f"Role '{role}' is not in the team table {sorted(self.team_models)}; add it there.")
        target, name = self.team_models[role], self.episode_for(role)
        if name not in self.endpoints:
            raise SwarmError(f"episode_for({role!r}) named {name!r}, which is not an open episode "
                             f"{sorted(self.endpoints)}.")
        via = self.endpoints[name]
        if via.api_key not in self._clients:
            openai = require("openai", "calling models with the openai SDK")
            self._clients[via.api_key] = openai.OpenAI(base_url=via.base_url, api_key=via.api_key,
                                                       max_retries=self.max_retries)
        return RoleLLM(self._clients[via.api_key], via.model if target in self.trainable else target, role)
