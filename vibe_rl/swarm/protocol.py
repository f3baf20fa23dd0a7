"""Wire models of the swarm server: OpenAI chat completions, episodes, control.

Pure pydantic (no uvicorn, no torch), so the client can share them. Responses on
the hot path are plain dicts built in `serving.py`; the status is built as `EngineStatus`
(`vibe_rl.swarm.server.status`), which the client reads back.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from vibe_rl.schema import Task, TrainJob, WorkflowOutput

# ---------------------------------------------------------------- OpenAI chat wire format


def _stop_list(stop: str | list[str] | None) -> list[str]:
    """The stop strings; empty ones are ignored (the engine ignores them too: one would match at once)."""
    if stop is None:
        return []
    return [s for s in ([stop] if isinstance(stop, str) else stop) if s]


def _null_is_unset(cls: type[BaseModel], data: Any) -> Any:
    """OpenAI reads `null` in an optional request field as "not set" (clients that build bodies from None
    defaults send `"n": null, "stream": null`), so a null optional field takes its default here too."""
    if not isinstance(data, dict):
        return data
    fields = cls.model_fields
    return {k: v for k, v in data.items() if v is not None or k not in fields or fields[k].is_required()}


class _OpenAIRequest(BaseModel):
    """An OpenAI request body: unknown fields are kept (and reported), a null optional field is unset."""

    model_config = ConfigDict(extra="allow")

    @model_validator(mode="before")
    @classmethod
    def _nulls(cls, data: Any) -> Any:
        return _null_is_unset(cls, data)


class ChatMessage(BaseModel):
    """One chat message as the OpenAI API sends it. Keys other than these fields are dropped (never stored: a
    client cannot grow an episode's stored data with keys the model never reads)."""

    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant", "tool"] = Field(description="Who speaks")
    content: str | list[dict[str, Any]] | None = Field(default=None, description="Text or a list of parts")
    name: str | None = Field(default=None, description="Optional speaker name")
    tool_calls: list[dict[str, Any]] | None = Field(default=None, description="Assistant tool calls")
    tool_call_id: str | None = Field(default=None, description="Which call a tool message answers")

    def text(self) -> str:
        """The content as plain text (text parts of a multi-part content are joined)."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(str(p.get("text", "")) for p in self.content if p.get("type", "text") == "text")


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = Field(default=False, description="Send a last chunk with token usage")


class ChatCompletionRequest(_OpenAIRequest):
    """`POST /v1/chat/completions`. docs/openai-compat.md says, field by field, what is served, refused
    (400) or ignored; `vibe_rl.swarm.server.openai_compat` enforces it."""

    model: str = Field(description="The served trainable model name, or a configured static model name")
    messages: list[ChatMessage] = Field(min_length=1, description="The conversation so far")
    tools: list[dict[str, Any]] | None = Field(default=None, description="OpenAI function tools")
    tool_choice: str | dict[str, Any] | None = Field(
        default=None, description="'auto' or 'none' ('none' hides the tools); 'required' and named functions are refused")
    stream: bool = Field(default=False, description="Answer as server-sent events")
    stream_options: StreamOptions | None = Field(default=None, description="Streaming options")
    n: int = Field(default=1, ge=1, le=64, description="Completions per call")
    temperature: float | None = Field(default=None, ge=0, le=2, description="Sampling temperature")
    top_p: float | None = Field(default=None, gt=0, le=1, description="Nucleus sampling mass")
    max_tokens: int | None = Field(default=None, ge=1, description="Cap on generated tokens")
    max_completion_tokens: int | None = Field(default=None, ge=1, description="Newer name of max_tokens")
    stop: str | list[str] | None = Field(default=None, description="Stop strings")
    seed: int | None = Field(default=None, ge=-(2**63), le=2**63 - 1, description="Sampling seed (an int64)")
    logprobs: bool = Field(default=False, description="Return per-token logprobs")
    top_logprobs: int | None = Field(default=None, ge=0, le=20, description="Most likely tokens per position "
                                     "(needs logprobs: true)")
    user: str | None = Field(default=None, description="Player tag, e.g. 'spy:player_3' (recorded)")
    response_format: dict[str, Any] | None = Field(
        default=None, description="{'type': 'text'} only; json_object and json_schema are refused (no constrained "
                                  "decoding)")
    presence_penalty: float | None = Field(default=None, description="Only 0 is served")
    frequency_penalty: float | None = Field(default=None, description="Only 0 is served")
    logit_bias: dict[str, float] | None = Field(default=None, description="Only empty is served")
    context_only: bool = Field(
        default=False, description="vibe-rl extension: record the call (traces, the prefix of later prompts) but never "
                                   "train on its tokens, e.g. a turn the reward does not depend on")

    def stop_list(self) -> list[str]:
        return _stop_list(self.stop)


class CompletionRequest(_OpenAIRequest):
    """`POST /v1/completions` (legacy text completions) on the trainable model; see docs/openai-compat.md."""

    model: str = Field(description="The served trainable model name")
    prompt: str | list[str] | list[int] | list[list[int]] = Field(
        description="Text, token ids, or a list of either (one choice group per prompt)")
    stream: bool = Field(default=False, description="Answer as server-sent events")
    stream_options: StreamOptions | None = Field(default=None, description="Streaming options")
    n: int = Field(default=1, ge=1, le=64, description="Completions per prompt")
    temperature: float | None = Field(default=None, ge=0, le=2, description="Sampling temperature")
    top_p: float | None = Field(default=None, gt=0, le=1, description="Nucleus sampling mass")
    max_tokens: int | None = Field(default=None, ge=1, description="Cap on generated tokens")
    stop: str | list[str] | None = Field(default=None, description="Stop strings")
    seed: int | None = Field(default=None, ge=-(2**63), le=2**63 - 1, description="Sampling seed (an int64)")
    logprobs: int | None = Field(default=None, ge=0, le=20, description="Return logprobs with this many top tokens")
    echo: bool = Field(default=False, description="Only false is served")
    suffix: str | None = Field(default=None, description="Refused (no fill-in-the-middle)")
    best_of: int | None = Field(default=None, ge=1, description="Only 1 (or n) is served")
    presence_penalty: float | None = Field(default=None, description="Only 0 is served")
    frequency_penalty: float | None = Field(default=None, description="Only 0 is served")
    logit_bias: dict[str, float] | None = Field(default=None, description="Only empty is served")
    user: str | None = Field(default=None, description="Player tag (recorded)")
    context_only: bool = Field(default=False, description="vibe-rl extension: record the choices but never train "
                                                          "on their tokens")

    def stop_list(self) -> list[str]:
        return _stop_list(self.stop)


# ---------------------------------------------------------------- episodes


class BeginEpisodeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    discard_episode_timeout: float | None = Field(
        default=None, gt=0, allow_inf_nan=False, description="Seconds without an LLM call after which the episode is discarded")
    kind: Literal["train", "eval"] = Field(
        default="train", description="'eval': served by the current weights, its reward (and its end metadata's bool "
                                     "'win', as eval/win_rate with a 95% interval) logged as eval/* at the next "
                                     "update, never pooled or trained on")
    group: str | None = Field(
        default=None, min_length=1, description="The GRPO group key the episode is pooled under; None: the task_id "
                                                "its end sends (how clients written for AgentJet's swarm group)")


class BeginEpisodeResponse(BaseModel):
    episode_uuid: str = Field(description="The episode id to pass to end/abort")
    base_url: str = Field(description="OpenAI base URL (ends in /v1)")
    api_key: str = Field(description="Random key that belongs to this episode alone")
    model: str = Field(description="Model name of the trainable model")


class EndEpisodeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    episode_uuid: str = Field(description="From begin_episode")
    task: Task = Field(description="The task; its task_id is the GRPO group unless the begin named a group")
    output: WorkflowOutput = Field(description="Reward and metadata of the episode; other keys join the metadata")

    @field_validator("task", mode="before")
    @classmethod
    def _task_id_is_text(cls, data: Any) -> Any:
        task_id = data.get("task_id") if isinstance(data, dict) else None
        if isinstance(task_id, (bool, list, dict)):  # str() would make a group key of 'True' or '[1, 2]'
            raise ValueError(f"task_id must be a string (or a number, taken as text), got {type(task_id).__name__} "
                             f"{str(task_id)[:80]}; send the task's stable id, e.g. str(seed)")
        return data


class AbortEpisodeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    episode_uuid: str = Field(description="From begin_episode")


# ---------------------------------------------------------------- the two-phase end (vibe_rl.swarm.server.txn)

TxnOutcome = Literal["prepared", "committed", "aborted"]


class PeerEpisode(BaseModel):
    """One episode of a transaction, as its peers reach it: its server, its id and its own (per-episode) key."""

    model_config = ConfigDict(extra="forbid")
    url: str = Field(min_length=8, max_length=2048, description="The server's root URL, e.g. http://127.0.0.1:10086 "
                                                                "(SwarmClient.url, not the /v1 base_url)")
    episode_uuid: str = Field(min_length=1, max_length=128, description="The episode's id on that server")
    api_key: str = Field(min_length=1, max_length=512, description="That episode's api_key (it opens that episode "
                                                                   "alone, so sharing it with the peers is safe)")

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")) or url.rstrip("/").endswith("/v1"):
            raise ValueError(f"peer url {url[:80]!r} must be a server's root URL such as http://127.0.0.1:10086 "
                             "(SwarmClient.url; not the episode's /v1 base_url)")
        return url.rstrip("/")


class PrepareEpisodeRequest(EndEpisodeRequest):
    """`POST /episode/prepare`: the first phase of ending one game's episodes on several servers together."""

    txn: str = Field(min_length=8, max_length=128, description="The transaction id, the same for every episode "
                                                               "of the game (a fresh random one per end)")
    peers: list[PeerEpisode] = Field(min_length=2, max_length=64, description="Every episode of the transaction, "
                                     "this one included")

    @model_validator(mode="after")
    def _names_itself(self) -> PrepareEpisodeRequest:
        uuids = [p.episode_uuid for p in self.peers]
        if self.episode_uuid not in uuids:
            raise ValueError(f"peers must list every episode of the transaction, this one ({self.episode_uuid}) "
                             "included; send the same peer list to each server")
        if len(set(uuids)) != len(uuids):
            raise ValueError("peers lists an episode twice; list each episode of the transaction once")
        return self


class TxnEpisodeRequest(BaseModel):
    """`POST /episode/commit` and `POST /episode/outcome`: one episode of a transaction."""

    model_config = ConfigDict(extra="forbid")
    episode_uuid: str = Field(description="From begin_episode")
    txn: str = Field(min_length=8, max_length=128, description="The transaction id its prepare carried")


class StartRequest(BaseModel):
    """`POST /control/start`: a TrainJob, or an empty body to use the server's --config job."""

    model_config = ConfigDict(extra="forbid")
    job: TrainJob | None = Field(default=None, description="The job; None uses the server's base job")


class Update(BaseModel):
    """One weight update as `GET /control/updates` reports it; every other metric is an extra field
    (loss, kl, clip_frac, grad_norm, reward_std, reward_<role>, tokens_per_s, ...)."""

    model_config = ConfigDict(extra="allow")

    step: int = Field(description="The global step this update produced (1 for the first)")
    ts: float = Field(default=0.0, description="Unix time the update was recorded")
    reward_mean: float = Field(default=0.0, description="Mean episode reward of the update's batch")
    episodes: int = Field(default=0, description="Episodes trained on")
    loss: float | None = Field(default=None, description="GRPO loss (None when the step was skipped)")


# ---------------------------------------------------------------- typed responses (client and server share them)


class _Response(BaseModel):
    """Responses keep fields a newer server adds (extra='allow'), so an older client still reads them."""

    model_config = ConfigDict(extra="allow")


class EndEpisodeResponse(_Response):
    """`POST /episode/end`."""

    episode_uuid: str = Field(description="The episode that ended")
    already_ended: bool = Field(description="True when this repeated an earlier end (idempotent; nothing changed)")
    status: str | None = Field(default=None, description="On a repeat: the stored status (completed, trained, ...)")
    llm_calls: int = Field(default=0, description="LLM calls the episode made (first end only)")
    trainable_turns: int = Field(default=0, description="Calls that will be trained on (static and context_only ones are context)")
    warning: str | None = Field(default=None, description="Set when a training episode ended without any LLM call "
                                "(nothing of it is trained; SwarmClient logs it as a warning)")
    txn: str | None = Field(default=None, description="POST /episode/commit: the transaction that committed it")


class AbortEpisodeResponse(_Response):
    """`POST /episode/abort`."""

    episode_uuid: str = Field(description="The episode that was dropped")
    aborted: bool = Field(description="True: nothing of it is trained on. False only for a prepared episode whose "
                                      "peers had all prepared: it committed instead (outcome)")
    llm_calls: int = Field(default=0, description="LLM calls it had made")
    outcome: TxnOutcome | None = Field(default=None, description="For a prepared episode: how its transaction "
                                       "ended (aborted, or committed when every peer had prepared)")


class PrepareEpisodeResponse(_Response):
    """`POST /episode/prepare`: the episode is prepared (closed to calls, its reward held, not yet pooled)."""

    episode_uuid: str = Field(description="The episode that was prepared")
    txn: str = Field(description="Its transaction")
    outcome: TxnOutcome = Field(description="'prepared' (a repeated prepare of a decided episode: its outcome)")


class OutcomeResponse(_Response):
    """`POST /episode/outcome`: how a transaction ended for one episode (asking aborts an unprepared episode)."""

    episode_uuid: str = Field(description="The episode asked about")
    txn: str = Field(description="The transaction asked about")
    outcome: TxnOutcome = Field(description="prepared (undecided), committed or aborted")


class PoolStatus(_Response):
    """Completed episodes waiting for the next weight update, and the counts of those set aside."""

    policy: str | None = Field(default=None, description="train.policy: when the pool is ready (None while OFFLINE)")
    completed_episodes: int = Field(default=0, description="Episodes in the pool")
    completed_tasks: int = Field(default=0, description="Tasks whose GRPO group is complete")
    completed_non_dummy_tasks: int = Field(default=0, description="Complete groups whose rewards are not all equal")
    target_tasks: int = Field(default=0, description="train.batch_size: complete groups one update needs")
    target_episodes: int = Field(default=0, description="batch_size * grpo_n")
    grpo_n: int = Field(default=0, description="Episodes per GRPO group")
    avg_episodes_per_task: float = Field(default=0.0, description="Mean episodes per task in the pool")
    discarded_episodes: int = Field(default=0, description="Episodes dropped after their idle timeout")
    aborted_episodes: int = Field(default=0, description="Episodes aborted by the client or by a stop")
    expired_episodes: int = Field(default=0, description="Episodes of groups that stayed incomplete too long")
    incomplete_tasks: int = Field(default=0, description="Groups still short of grpo_n episodes")
    oldest_incomplete_idle_s: float = Field(default=0.0, description="Idle age of the oldest incomplete group")
    incomplete_group_ttl_s: float | None = Field(default=None, description="When an incomplete group expires")


class RunningEpisode(_Response):
    episode_uuid: str = Field(description="A running episode")
    llm_calls: int = Field(default=0, description="Its LLM calls so far")
    idle_s: float = Field(default=0.0, description="Seconds since its last LLM call (0 while one runs)")


class OpponentRecord(_Response):
    model: str = Field(description="A checkpoint-sourced static model (its `source` is checkpoint:...)")
    step: int = Field(description="The checkpoint step it played (0: the initial model)")
    games: int = Field(default=0, description="Ended episodes that played it and reported a boolean metadata['win']")
    learner_wins: int = Field(default=0, description="Of those, the ones the learner side won")
    draw_weight: float = Field(default=0.0, description="(1 - p)^2 with p = (learner_wins + 1) / (games + 2): its "
                               "relative weight in a checkpoint:pool:last-K:by-win-rate draw")


EngineState = Literal["OFFLINE", "BOOTING", "ROLLING", "WEIGHT_SYNCING", "FINISHED"]


class EngineStatus(_Response):
    """`GET /control/status` (and `POST /control/start`, `/control/stop`)."""

    state: EngineState = Field(
        description="OFFLINE: no engine (a client's job starts it; `errors` says why a boot failed); BOOTING: loading "
                    "and resuming; ROLLING: serving episodes and collecting groups; WEIGHT_SYNCING: a weight update "
                    "runs (chat calls wait for it); FINISHED: train.total_steps updates are done, episodes are still "
                    "served and stored but never trained")
    global_step: int = Field(default=0, description="Weight updates done")
    weight_version: int = Field(default=0, description="Version of the weights now served")
    model: str = Field(default="", description="The trainable model's name (pass it as model=)")
    total_steps: int = Field(default=0, description="train.total_steps (0: no limit)")
    pool: PoolStatus = Field(default_factory=PoolStatus, description="The pool of completed episodes")
    running_count: int = Field(default=0, description="Episodes begun and not yet ended")
    prepared_count: int = Field(default=0, description="Of those, episodes prepared (the first phase of a "
                                "multi-server end) and waiting for their commit or abort")
    running_episodes: list[RunningEpisode] = Field(default_factory=list, description="Up to 200, most idle first")
    tasks: list[dict[str, Any]] = Field(default_factory=list, description="Per-task rows of the pool, largest "
                                        "groups first: task_id, episodes, reward_mean, reward_std")
    last_update: dict[str, Any] | None = Field(default=None, description="Metrics of the last weight update (`step` "
                                               "and the fields of GET /control/updates); None before the first")
    notes: list[str] = Field(default_factory=list, description="What the server adjusted or noticed")
    errors: list[str] = Field(default_factory=list, description="Recent errors (boot, updates, requests)")
    devices: list[dict[str, Any]] = Field(default_factory=list, description="Where the engine runs (rank, device)")
    counters: dict[str, int] = Field(default_factory=dict, description="Running totals since the server started: "
                                     "llm_calls, generated_tokens (trainable model), episodes_ended, and of two-phase ends episodes_prepared, "
                                     "peer_commits / peer_aborts (prepared episodes this server settled by "
                                     "asking their peers: no commit came in time, or the client aborted them)")
    job: TrainJob | None = Field(default=None, description="The job the engine runs, after the server's overrides")
    chat_template: dict[str, str] | None = Field(
        default=None, description="How tools, assistant tool_calls and tool messages reach the model: 'template' "
                                  "(its chat template renders them) or 'prompt' (the server writes them into the "
                                  "messages in Hermes format); None while no engine is loaded")
    trace_viewer: str = Field(default="/control/ui", description="Path of the game-aware trace viewer on this "
                              "server (`vibe-rl swarm ui` prints a login link to it)")
    opponents: list[OpponentRecord] = Field(
        default_factory=list, description="The learner's record against each past checkpoint that played a static "
                                          "seat (source: checkpoint:...), by model and step")


class StoppedStatus(EngineStatus):
    """`POST /control/stop`: the status as the engine stopped (OFFLINE; global_step where it ended)."""

    abandoned_running_episodes: int = Field(default=0, description="Episodes that were running when the engine "
                                            "stopped (dropped, counted in pool.aborted_episodes)")


class ModelCard(_Response):
    id: str = Field(description="Model name to pass as model=")
    object: str = Field(default="model", description="Always 'model'")
    created: int = Field(default=0, description="Unix time (0: unknown)")
    owned_by: str = Field(default="vibe-rl", description="Always 'vibe-rl'")


class ModelList(_Response):
    """`GET /v1/models`: the trainable model first, then the static models."""

    object: str = Field(default="list", description="Always 'list'")
    data: list[ModelCard] = Field(default_factory=list, description="The served models")
