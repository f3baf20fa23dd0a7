"""TaskSpec: what a planner extracts from a natural-language spec, and what a project is rendered from.

It is saved in every generated project as `task_spec.json`. `vibe-rl run` reads it to know which swarm
servers a mode starts (ports, GPUs, config files, tmux sessions) and which model each role's calls
must reach (for the trace audit); `vibe-rl doctor` reads it to check the project's wiring.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, model_validator

from vibe_rl.errors import ConfigError, field_errors
from vibe_rl.schema.job import (
    EngineConfig,
    ExperimentConfig,
    RolloutConfig,
    StaticModel,
    TrainConfig,
    TrainJob,
)

SPEC_FILE = "task_spec.json"


class Team(BaseModel):
    """A side of the game whose players share one model."""

    name: str = Field(description="Team name, e.g. 'civilians'")
    roles: list[str] = Field(min_length=1, description="Roles that belong to this team, e.g. ['civilian']")
    model: str = Field(description="Default model of the team: a server name (trainable) or a static model name")


class Server(BaseModel):
    """One swarm server: one trainable model on its own port and GPUs."""

    name: str = Field(description="Server name used in modes and team wiring, e.g. 'server1'")
    port: int = Field(ge=1, le=65535, description="Port the server listens on")
    model_path: str = Field(description="HF model directory of the trainable model ('tiny' on CPU)")
    gpus: int = Field(default=1, ge=0, description="GPUs this server uses (0: CPU)")
    config: str = Field(description="TrainJob YAML file of this server, relative to the project")
    url_env: str = Field(description="Env var the client reads the server URL from")
    static_models: list[str] = Field(default_factory=list, description="Static models this server forwards to")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


class Training(BaseModel):
    """GRPO and sampling settings shared by every trainable server."""

    batch_size: int = Field(default=16, ge=1, description="Tasks (GRPO groups) per weight update")
    grpo_n: int = Field(default=4, ge=1, description="Episodes per task (GRPO group size)")
    lr: float = Field(default=1e-6, gt=0, description="Learning rate")
    save_freq: int = Field(default=5, ge=0, description="Checkpoint every N steps")
    total_steps: int = Field(default=0, ge=0, description="Stop after N weight updates (0: no limit)")
    temperature: float = Field(default=1.0, ge=0, description="Sampling temperature of the trainable model")
    max_tokens: int = Field(default=256, ge=1, description="Cap on tokens per LLM call (small keeps CPU runs fast)")
    max_model_len: int = Field(default=8192, ge=16, description="Longest prompt+response in tokens")


class Mode(BaseModel):
    """A way to run the project: which script, which servers, which model each team plays with."""

    name: str = Field(description="Mode name, e.g. 'agent_roll' or 'agent_roll_adv'")
    script: str = Field(description="Training loop script, e.g. 'agent_roll.py'")
    run_file: str = Field(description="Episode file whose TEAM_MODELS wires roles to models, e.g. 'agent_run.py'")
    servers: list[str] = Field(min_length=1, description="Servers this mode starts, first one first")
    teams: dict[str, str] = Field(default_factory=dict, description="Team -> model override for this mode")
    rewarded: dict[str, str] = Field(default_factory=dict, description="Server -> the team whose win it rewards")
    gpus: dict[str, int] = Field(default_factory=dict, description="Server -> GPUs in this mode (default: the server's)")


class RewardScheme(BaseModel):
    """Episode rewards of a trainable side; win must differ from loss or GRPO has no signal."""

    win: float = Field(default=1.0, description="Reward of the trainable side when its team wins")
    loss: float = Field(default=0.0, description="Reward of the trainable side when its team loses")
    description: str = Field(default="win 1, loss 0", description="The scheme in words")


class Constraints(BaseModel):
    """Rules the generated code follows."""

    no_chinese_in_code: bool = Field(default=True, description="Code, comments and prompts in code are English only")
    random_ids_and_names: bool = Field(default=True, description="Shuffle player ids and names every episode")
    use_openai_sdk_tools: bool = Field(default=True, description="Players use the OpenAI SDK; actions are tool calls")


class RoleModel(BaseModel):
    """Where the calls of one role go in one mode."""

    role: str = Field(description="The role")
    team: str = Field(description="The role's team")
    kind: Literal["server", "static"] = Field(description="'server': trainable; 'static': forwarded by name")
    name: str = Field(description="Server name or static model name")
    server: str = Field(description="The server whose episode URL the calls use")


class TaskSpec(BaseModel):
    """Everything needed to render and run a training project."""

    family: str = Field(description="Template family, a folder under templates/, e.g. 'who_is_spy'")
    name: str = Field(description="Project slug (folder name under generated/), e.g. 'who_is_spy'")
    short_name: str = Field(description="Short prefix for tmux sessions, e.g. 'spy' -> 'spy-swarm-server'")
    title: str = Field(default="", description="Human title of the project")
    description: str = Field(default="", description="One paragraph on what is trained and how")
    gpus: int = Field(default=1, ge=0, description="GPUs of the training node, as the user stated")
    game: dict[str, Any] = Field(default_factory=dict, description="Family parameters (see the manifest)")
    teams: list[Team] = Field(min_length=1, description="Teams and their default models")
    servers: list[Server] = Field(min_length=1, description="Trainable swarm servers")
    static_models: list[StaticModel] = Field(default_factory=list, description="Frozen opponents, by name: an endpoint, a local copy, or a past checkpoint of the trainable model (`source: checkpoint:latest | checkpoint:step:N | checkpoint:pool:last-K`)")
    training: Training = Field(default_factory=Training, description="GRPO settings")
    modes: list[Mode] = Field(min_length=1, description="Run modes; the first is the default")
    reward: RewardScheme = Field(default_factory=RewardScheme, description="Reward scheme")
    constraints: Constraints = Field(default_factory=Constraints, description="Code constraints")
    notes: list[str] = Field(default_factory=list, description="Every default or assumption the planner made (a value "
                             "the spec did not give, a mode it added, a URL it filled in); shown to the user")
    unparsed: list[str] = Field(default_factory=list, description="Clauses of the spec holding a number, path, env var "
                                "or model name the planner could not place in this TaskSpec; `vibe-rl new` prints them "
                                "as 'not understood'. Fix the plan by hand (`vibe-rl new --plan`) or rephrase the spec")

    @model_validator(mode="after")
    def _check_refs(self) -> TaskSpec:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", self.name):
            raise ValueError(f"name {self.name!r} must be a lowercase slug like 'who_is_spy'")
        if not re.fullmatch(r"[a-z][a-z0-9-]*", self.short_name):
            raise ValueError(f"short_name {self.short_name!r} must be lowercase letters, digits, '-'")
        servers = {s.name for s in self.servers}
        models = servers | {m.name for m in self.static_models}
        teams = {t.name for t in self.teams}
        for team in self.teams:
            if team.model not in models:
                raise ValueError(f"team {team.name} plays {team.model!r}, which is neither a server {sorted(servers)} "
                                 f"nor a static model {[m.name for m in self.static_models]}")
        for mode in self.modes:
            for s in mode.servers + list(mode.rewarded) + list(mode.gpus):
                if s not in servers:
                    raise ValueError(f"mode {mode.name} uses unknown server {s!r}; servers: {sorted(servers)}")
            for team, model in mode.teams.items():
                if team not in teams or model not in models:
                    raise ValueError(f"mode {mode.name} wires team {team!r} to {model!r}; teams: {sorted(teams)}, "
                                     f"models: {sorted(models)}")
            for team in mode.rewarded.values():
                if team not in teams:
                    raise ValueError(f"mode {mode.name} rewards unknown team {team!r}")
        return self

    # ---- lookups used by `vibe-rl run`, `doctor` and the renderer -------------------------------
    def mode(self, name: str | None = None) -> Mode:
        if name is None:
            return self.modes[0]
        for mode in self.modes:
            if mode.name == name:
                return mode
        raise ConfigError(f"Mode {name!r} is not in this project; modes: {[m.name for m in self.modes]}")

    def server(self, name: str) -> Server:
        for server in self.servers:
            if server.name == name:
                return server
        raise ConfigError(f"Server {name!r} is not in this project; servers: {[s.name for s in self.servers]}")

    def servers_for(self, mode: str | None = None) -> list[Server]:
        """The servers mode M starts, in order (first = the client's default URL)."""
        return [self.server(name) for name in self.mode(mode).servers]

    def gpu_split(self, mode: str | None = None) -> dict[str, list[int]]:
        """Server name -> the GPU indices it gets in mode M (consecutive blocks, in server order)."""
        split, next_gpu = {}, 0
        for server in self.servers_for(mode):
            count = self.mode(mode).gpus.get(server.name, server.gpus)
            split[server.name] = list(range(next_gpu, next_gpu + count))
            next_gpu += count
        return split

    def get(self, field: str) -> Any:
        """The value a dotted field name stands for (the names of the planner corpus and the review table):
        `modes` (the mode names), `wire.<mode>.<role>` (the model that plays the role there), `gpu_split.<mode>`,
        else a path into the JSON form (`training.lr`, `servers.0.port`, `game.roles.seer`); KeyError or
        IndexError when the path is not there."""
        head, _, rest = field.partition(".")
        if field == "modes":
            return [m.name for m in self.modes]
        if head == "wire":
            mode, role = rest.split(".")
            return self.model_for_role(role, mode).name
        if head == "gpu_split":
            return self.gpu_split(rest)
        value: Any = self.model_dump(mode="json")
        for part in field.split("."):
            value = value[int(part)] if isinstance(value, list) else value[part]
        return value

    def team_of(self, role: str) -> Team:
        for team in self.teams:
            if role in team.roles:
                return team
        raise ConfigError(f"Role {role!r} is in no team; roles: {self.roles}")

    @property
    def roles(self) -> list[str]:
        return [role for team in self.teams for role in team.roles]

    def model_for_role(self, role: str, mode: str | None = None) -> RoleModel:
        """Which model the calls of `role` must reach in mode M (a server, or a static model by name)."""
        m, team = self.mode(mode), self.team_of(role)
        target = m.teams.get(team.name, team.model)
        servers = {s.name for s in self.servers}
        if target in servers:
            return RoleModel(role=role, team=team.name, kind="server", name=target, server=target)
        return RoleModel(role=role, team=team.name, kind="static", name=target, server=m.servers[0])

    def train_job(self, server: str) -> TrainJob:
        """The TrainJob written to the server's config file."""
        s, t = self.server(server), self.training
        statics = [m for m in self.static_models if m.name in s.static_models]
        return TrainJob(
            model=EngineConfig(path=s.model_path, max_model_len=t.max_model_len),
            rollout=RolloutConfig(temperature=t.temperature, max_tokens=t.max_tokens),
            train=TrainConfig(batch_size=t.batch_size, grpo_n=t.grpo_n, lr=t.lr, save_freq=t.save_freq,
                              total_steps=t.total_steps),
            experiment=ExperimentConfig(name=f"{self.name}_{s.name}", dir=f"experiments/{s.name}"),
            static_models=statics,
        )

    # ---- files -------------------------------------------------------------------------------
    def save(self, project_dir: str | Path) -> Path:
        path = Path(project_dir) / SPEC_FILE
        path.write_text(self.model_dump_json(indent=2) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, project_dir: str | Path) -> TaskSpec:
        """Read `task_spec.json` from a project folder (or the file itself)."""
        path = Path(project_dir)
        if path.is_dir():
            path = path / SPEC_FILE
        if not path.is_file():
            raise ConfigError(f"{path} does not exist. Is this a project made by `vibe-rl new`? "
                              f"Re-create it, or write the TaskSpec there (see `vibe-rl new --dry-run --json`).")
        try:
            return cls.model_validate(json.loads(path.read_text(encoding="utf-8")))
        except (ValueError, ValidationError) as exc:
            why = field_errors(exc) if isinstance(exc, ValidationError) else str(exc)
            raise ConfigError(f"{path} is not a valid TaskSpec: {why}. `vibe-rl schema taskspec` prints every field "
                              "and its meaning.") from None
