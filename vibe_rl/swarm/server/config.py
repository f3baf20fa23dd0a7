"""The swarm server's own settings (not the training job, which clients sync)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, SecretStr

from vibe_rl.config import apply_overrides
from vibe_rl.schema import TrainJob
from vibe_rl.swarm.server.errors import ApiError


class ServerConfig(BaseModel):
    """How one swarm server process runs. `model`, `overrides` and `experiment_dir`
    win over whatever job a client syncs (that is how a CPU box forces the tiny model)."""

    host: str = Field(default="127.0.0.1", description="Bind address (loopback unless told otherwise)")
    port: int = Field(default=10086, ge=0, le=65535, description="TCP port")
    base_job: TrainJob | None = Field(default=None, description="Job from --config; used by an empty /control/start")
    boot_on_start: bool = Field(default=False, description="Start the engine with base_job at server start")
    model: str | None = Field(default=None, description="--model: overrides model.path of any synced job")
    overrides: list[str] = Field(default_factory=list, description="--set key.sub=value: override any synced job")
    experiment_dir: str | None = Field(default=None, description="--experiment-dir: overrides experiment.dir")
    default_discard_timeout: float = Field(default=3600.0, gt=0,
                                           description="Idle seconds before an episode without its own timeout is discarded")
    sync_wait_timeout: float = Field(default=600.0, ge=0,
                                     description="How long a chat call waits for a weight update before 429 + Retry-After")
    reaper_interval: float = Field(default=0.5, gt=0, description="Seconds between idle-episode sweeps")
    switch_interval: float = Field(default=0.001, gt=0, description=(
        "sys.setswitchinterval of the server process: how soon the event loop gets the GIL back from the "
        "engine thread (Python's 5 ms default adds milliseconds to calls while the engine is busy)"))
    trace_buffer: int = Field(default=5000, ge=1, description="Recent LLM calls kept for /control/traces")
    token: SecretStr | None = Field(default=None, description=(
        "--token: the admin token; None takes VIBE_RL_SWARM_TOKEN, then the token file, else generates one"))
    token_file: str | None = Field(default=None, description=(
        "--token-file: where the admin token is kept (0600); default <experiment dir>/swarm.token when known"))
    allowed_hosts: list[str] = Field(default_factory=list, description=(
        "--allowed-host: extra Host/Origin names accepted besides the bind address and loopback names"))
    header_timeout: float = Field(default=10.0, gt=0, le=3600, description=(
        "--header-timeout: seconds a connection may take to send a request's headers, from its opening or the end "
        "of its previous response; then it is closed (slow-header clients cannot hold connections open)"))
    keep_alive_timeout: float = Field(default=5.0, gt=0, le=3600,
                                      description="Seconds an idle keep-alive connection stays open")
    max_body_bytes: int = Field(default=8 * 1024 * 1024, ge=1024, description="Largest request body (else 413)")
    max_messages: int = Field(default=2048, ge=1, description="Most messages in one chat call (else 400)")
    max_tools: int = Field(default=128, ge=1, description="Most tools one chat call may offer (else 400)")
    max_tools_bytes: int = Field(default=256 * 1024, ge=1024, description=(
        "Largest total size of a chat call's tool schemas, as JSON (else 400 tools_too_large)"))
    max_choices: int = Field(default=256, ge=1, description=(
        "Most completions one /v1/completions call may ask for (prompts x n; else 400)"))
    max_task_id_chars: int = Field(default=256, ge=1, description="Longest task_id accepted by end (else 400)")
    max_metadata_bytes: int = Field(default=256 * 1024, ge=0,
                                    description="Largest task + output metadata of one end, as JSON (else 400)")
    max_running_episodes: int = Field(default=16_384, ge=1, description=(
        "Most episodes begun and not yet ended, aborted or discarded; a begin beyond it is refused (503 "
        "too_many_running_episodes), so a client that never ends its episodes cannot grow the server's memory"))
    max_episode_bytes: int = Field(default=64 * 1024 * 1024, ge=1024, description=(
        "Most request bytes the chat calls of one episode may add up to (each call's messages are stored with "
        "the episode); a call beyond it is refused with 413 episode_too_large"))
    max_episode_calls: int = Field(default=4096, ge=1, description=(
        "Most LLM calls of one episode; a call beyond it is refused with 413 episode_too_many_calls"))
    max_abs_reward: float = Field(default=1e6, gt=0, description="Rewards must satisfy |r| <= this (else 400)")
    max_discard_timeout: float = Field(default=7 * 86400.0, gt=0,
                                       description="Largest discard_episode_timeout a begin may ask for (else 400)")
    prepared_timeout: float | None = Field(default=None, gt=0, le=86400, description=(
        "--prepared-timeout: seconds a prepared episode (the first phase of a multi-server end, "
        "vibe_rl.swarm.server.txn) waits for its client's commit or abort before the server asks the episode's "
        "peers how the transaction ended (and again this often while a peer cannot be reached); None: the "
        "episode's idle timeout, at most 60 s"))
    incomplete_group_ttl: float = Field(default=6 * 3600.0, gt=0, description=(
        "Seconds a task group may stay below grpo_n episodes without a new one before it is discarded "
        "(counted, and noted in the status); groups of the 'episodes' policy are never incomplete"))

    def static_models(self) -> list:
        """The static models this server may serve: its own --config job's, never a synced job's."""
        return list(self.base_job.static_models) if self.base_job is not None else []

    def effective_job(self, job: TrainJob) -> tuple[TrainJob, list[str]]:
        """The job after server-side overrides, plus one note per override that changed something."""
        data: dict[str, Any] = job.model_dump(mode="json")
        notes = []
        own = {m.name: m.model_dump(mode="json") for m in self.static_models()}
        foreign = [m.name for m in job.static_models if own.get(m.name) != m.model_dump(mode="json")]
        if foreign:
            raise ApiError(403, f"The job names static models {foreign} that this server was not started with "
                                f"(it serves {sorted(own) or 'none'}). Static models (URLs, key env vars) come only "
                                "from the server's own --config file; add them there and restart the server, or "
                                "remove them from the synced job.", code="static_model_not_allowed",
                           param="static_models")
        data["static_models"] = list(own.values())
        if self.model and data["model"]["path"] != self.model:
            notes.append(f"--model {self.model} overrides the synced model.path={data['model']['path']}")
            data["model"]["path"] = self.model
        if self.experiment_dir and data["experiment"]["dir"] != self.experiment_dir:
            notes.append(f"--experiment-dir {self.experiment_dir} overrides experiment.dir={data['experiment']['dir']}")
            data["experiment"]["dir"] = self.experiment_dir
        if self.overrides:
            before = TrainJob.model_validate(data).model_dump(mode="json")
            data = apply_overrides(data, list(self.overrides))
            after = TrainJob.model_validate(data).model_dump(mode="json")
            if after != before:
                notes.append(f"--set {' '.join(self.overrides)} overrides the synced job")
        effective = TrainJob.model_validate(data)
        trainable = {effective.model.path, effective.model.path.rstrip("/").rsplit("/", 1)[-1]}
        clash = [m.name for m in effective.static_models if m.name in trainable]
        if clash:
            raise ApiError(400, f"Static model {clash[0]!r} has the trainable model's name; calls to it would be "
                                "ambiguous. Rename the static model in the server's --config.",
                           code="static_model_name_clash", param="static_models")
        return effective, notes
