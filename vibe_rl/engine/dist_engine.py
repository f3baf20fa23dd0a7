"""A trainable engine spread over every rank of a process group (one process per GPU).

Rank 0 (the HTTP server's process) holds a `DistributedEngine`, which is an ordinary Engine to
the swarm server. Ranks 1.. run `worker_loop`. Each rank holds the same `RankState`:

* a `ShardedTrainer` (FSDP2: 1/world of the weights, gradients and AdamW state), and
* a generation replica: a `TorchEngine` with a full copy of the weights and no optimizer; or, with
  `model.generation_replicas` off (or `auto` when a copy does not fit beside the shards), none:
  rank 0's `TorchEngine` serves the sharded training model itself, and before each of its
  forward passes rank 0 broadcasts `forward`, so every rank runs one too and takes part in the
  weight gathers (the other ranks' inputs are a single token; their outputs are dropped).

Rank 0 broadcasts each command on the control group; every rank then runs it together:

    boot   build trainer + replica; workers start a ReplicaServer and report its address
    train  `ShardedTrainer.step` on the whole batch, then every replica gets the new weights
    save   gather the optimizer state to rank 0; rank 0 writes the checkpoint (full tensors)
    load   rank 0 reads the checkpoint and the trainer shards it onto every rank; replicas re-sync
    forward  one pass of the sharded model without a replica (rank 0 is generating)
    close  free the engine (workers go back to waiting for a boot)
    exit   end the worker processes (rank 0 is shutting down)

With replicas, generation never needs the group: rank 0 hands each request to the replica with
the fewest requests in flight (its own, or a worker's through `vibe_rl.engine.replicas`).
Without, every group command first holds rank 0's generation lock, so a command never lands
between a generating batch's passes (the workers would take it for a pass).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import secrets
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from vibe_rl.engine.distributed import DistEnv
from vibe_rl.errors import EngineError
from vibe_rl.extras import require

log = logging.getLogger(__name__)


class RankState:
    """What one rank holds while an engine is booted (the same on every rank)."""

    def __init__(self, env: DistEnv, config: Any, train: Any):
        torch = require("torch", "multi-GPU training")
        from vibe_rl.engine.fsdp import ShardedTrainer
        from vibe_rl.engine.loader import load_causal_lm, resolve_dtype, resolve_model_path
        from vibe_rl.engine.torch_engine import TorchEngine, _wrap_lora

        self.env = env
        if config.device not in ("auto", env.device_type) and not config.device.startswith(env.device_type):
            raise EngineError(f"model.device is {config.device!r} but this server's ranks run on {env.device_type}. "
                              "Restart the server with --nproc-per-node 1 to run on one device, or use device: auto.")
        path = resolve_model_path(config.path, config.cache_dir)
        dtype = resolve_dtype(config.dtype, env.device_type)
        lora = config.lora.rank > 0
        torch.manual_seed(config.seed)  # the same LoRA init as a single-process engine
        model = load_causal_lm(path, env.device, dtype)
        pad_id = _pad_id(path, model)
        if lora:
            model = _wrap_lora(model, config)
        ref = None
        if train.kl_coef > 0 and not lora:
            ref = load_causal_lm(path, env.device, dtype)
        limit = getattr(model.config, "max_position_embeddings", None) or config.max_model_len
        max_len = min(config.max_model_len, int(limit))
        self.trainer = ShardedTrainer(model, train, env, pad_id=pad_id, max_model_len=max_len, lora=lora,
                                      ref_model=ref)
        del model, ref
        self.gathered = config.generation_replicas == "off"  # rank 0 settled "auto" before the boot
        self.replica: Any = None  # rank 0 always; the others only with replicas
        self.before_forward: Any = None  # gathered, rank 0: DistributedEngine's "forward" broadcast
        self.read_weights: dict[str, Any] | None = None  # gathered, rank 0: a checkpoint read, not yet loaded
        if self.gathered:
            if env.rank == 0:
                rcfg = config.model_copy(update={"device": env.device, "generator": "simple"})
                self.replica = TorchEngine(rcfg, train.model_copy(update={"kl_coef": 0.0}), trainable=True,
                                           model=self.trainer.model)
                self.replica.optimizer = None
                self.trainer.model.register_forward_pre_hook(self._announce_forward, prepend=True)
                self.trainer.model.register_forward_hook(self._after_forward)
        else:
            # the generation replica: a full copy, no optimizer, its own sampling seed per rank
            rcfg = config.model_copy(update={"device": env.device, "seed": config.seed + env.rank})
            self.replica = TorchEngine(rcfg, train.model_copy(update={"kl_coef": 0.0}), trainable=True)
            self.replica.optimizer = None
            self.replica.model.requires_grad_(False)
            if lora:  # the adapters were initialised separately: start the replica from the trainer's
                self.trainer.sync_replica(self.replica.model)
                self._mirror()
        self.server = None

    def _announce_forward(self, module: Any, args: Any) -> None:
        """Rank 0, gathered: a generation pass is about to start; every other rank joins it."""
        if not self.trainer.in_step and self.before_forward is not None:
            self.before_forward()

    def _after_forward(self, module: Any, args: Any, output: Any) -> None:
        if not self.trainer.in_step:
            module.reshard()

    def forward(self) -> None:
        """A worker's share of a gathered generation pass: one token in, the output dropped."""
        torch = require("torch")
        with torch.no_grad():
            self.trainer.model(input_ids=torch.zeros((1, 1), dtype=torch.long, device=self.env.device),
                               use_cache=False)
        self.trainer.model.reshard()  # as rank 0 does after its pass (the root keeps its weights gathered)

    def _held(self) -> Any:
        """The replica's lock, unless the engine already holds it for the whole group command (gathered)."""
        if self.replica is None or self.gathered:
            return contextlib.nullcontext()
        return self.replica._exclusive()

    def train(self, samples: list[Any]) -> dict[str, float]:
        with self._held():
            metrics = self.trainer.step(samples, replica=None if self.gathered else self.replica.model)
            self._mirror()
        return metrics

    def _mirror(self) -> None:
        """The replica reports the trainer's step and version, and drops KV cached under old weights."""
        if self.replica is None:
            return
        self.replica.version, self.replica.step = self.trainer.version, self.trainer.step_count
        self.replica.nan_skipped_total = self.trainer.nan_skipped_total
        if hasattr(self.replica, "_weights_changed"):
            self.replica._weights_changed()

    def save(self, directory: Path | None) -> Path | None:
        from vibe_rl.engine.checkpoint import save_checkpoint

        state = self.trainer.full_optimizer_state()  # collective; only rank 0 keeps it
        weights = self.trainer.full_model_state() if self.gathered else None  # collective too
        if self.env.rank != 0:
            return None
        with self._held():
            return save_checkpoint(self.replica, Path(directory), optimizer_state=state,
                                   world_size=self.env.world_size, model_state=weights)

    def read(self, directory: Path) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """Rank 0, before the load command: the checkpoint into its replica (checked), its optimizer state."""
        from vibe_rl.engine import checkpoint

        names = [n for n, _ in self.trainer.trainable]
        self.read_weights = None
        if self.gathered:  # no replica to load into: rank 0 keeps the full tensors until the load command
            state = checkpoint.read_state(self.replica, Path(directory))
            self.read_weights = checkpoint.read_weights(self.replica, Path(directory), names)
            checkpoint.restore_counters(self.replica, state)
        else:
            with self.replica._exclusive():
                checkpoint.load_checkpoint(self.replica, Path(directory))
        saved = checkpoint.read_optimizer_state(Path(directory))
        info = {"step": self.replica.step, "version": self.replica.version,
                "nan_skipped_total": self.replica.nan_skipped_total, "optimizer": saved is not None}
        return (checkpoint.named_optimizer_state(saved, names) if saved is not None else None), info

    def load(self, optimizer_state: dict[str, Any] | None, info: dict[str, Any]) -> None:
        weights = None
        if self.env.rank == 0 and self.gathered:
            weights, self.read_weights = self.read_weights, None
        elif self.env.rank == 0:
            params = dict(self.replica.model.named_parameters())
            weights = {n: params[n].detach() for n, _ in self.trainer.trainable}
        with self._held():
            self.trainer.load_full(weights, optimizer_state, info["optimizer"])
            if not self.gathered:
                self.trainer.sync_replica(self.replica.model)
            self.trainer.version, self.trainer.step_count = int(info["version"]), int(info["step"])
            self.trainer.nan_skipped_total = int(info["nan_skipped_total"])
            self._mirror()

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
        if self.replica is not None:
            self.replica.close()
        self.trainer = self.replica = None  # type: ignore[assignment]
        gc.collect()
        torch = require("torch")
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


class DistributedEngine:
    """Rank 0's Engine: generation over every rank's replica, training sharded over all ranks."""

    def __init__(self, config: Any, train: Any, env: DistEnv):
        from vibe_rl.engine.replicas import RemoteReplica

        config = config.model_copy(update={"generation_replicas": generation_replicas(config, env)})
        self.env, self.config = env, config
        self._lock = threading.Lock()  # one command at a time on the group
        key = secrets.token_bytes(32)
        env.broadcast(("boot", config, train, key))
        self.state, errors = _boot(env, config, train)
        addresses = env.gather(None)
        if errors:
            if self.state is not None:
                self.state.close()
            raise EngineError("The engine failed to start on some ranks: " + "; ".join(errors))
        self.local = self.state.replica
        self.gathered = self.state.gathered
        self.state.before_forward = self._forward
        self.remotes = [RemoteReplica(a, key, rank) for rank, a in enumerate(addresses or []) if rank > 0 and a]
        self.tokenizer, self.max_model_len = self.local.tokenizer, self.local.max_model_len
        self.device, self.lora, self.path = env.device, self.local.lora, self.local.path
        self.devices = self._describe()
        self._local_in_flight = 0
        self._closed = False
        self._broken: str | None = None

    def _describe(self) -> list[dict[str, Any]]:
        return self.env.all_gather(self.env.describe())

    @property
    def version(self) -> int:
        return self.state.trainer.version if self.state is not None else 0

    @property
    def step(self) -> int:
        return self.state.trainer.step_count if self.state is not None else 0

    # ---- generation ----------------------------------------------------------------------------

    def submit(self, prompt_ids: list[int], sampling: Any = None, on_token: Any = None) -> Future:
        if self._closed:
            raise EngineError("The engine is closed; build a new one with load_engine(...).")
        remote = min(self.remotes, key=lambda r: r.in_flight, default=None)
        if on_token is None and remote is not None and remote.in_flight < self._local_in_flight:
            return remote.submit(prompt_ids, sampling)
        fut = self.local.submit(prompt_ids, sampling, on_token=on_token) if on_token else \
            self.local.submit(prompt_ids, sampling)
        self._local_in_flight += 1
        fut.add_done_callback(self._local_done)
        return fut

    def _local_done(self, _f: Future) -> None:
        self._local_in_flight -= 1

    def generate(self, prompt_ids: list[int], sampling: Any = None) -> Any:
        return self.submit(prompt_ids, sampling).result()

    # ---- group commands ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def _group(self, command: tuple) -> Iterator[None]:
        """Run `command` on every rank. A failure midway leaves the ranks out of step (some may wait in
        a collective), so the engine refuses further commands: restart the server, it resumes from the
        last checkpoint."""
        held = self.local._exclusive() if self.gathered else contextlib.nullcontext()
        with held, self._lock:
            if self._broken:
                raise EngineError(self._broken)
            self.env.broadcast(command)
            try:
                yield
            except Exception as exc:
                self._broken = (f"A {command[0]} on the ranks failed ({type(exc).__name__}: {exc}); the ranks are "
                                "out of step. Restart the server: it resumes from the last checkpoint.")
                self.env.broken = True
                log.exception("group command %s failed", command[0])
                raise EngineError(self._broken) from exc

    def _forward(self) -> None:
        """Gathered generation, rank 0, inside a generating batch (which holds the local engine's lock):
        every other rank runs one pass with this one."""
        with self._lock:
            if self._broken:
                raise EngineError(self._broken)
            self.env.broadcast(("forward",))

    def train(self, samples: list[Any]) -> dict[str, float]:
        with self._group(("train", samples)):
            return self.state.train(samples)

    def save(self, directory: str | Path) -> Path:
        with self._group(("save",)):
            return self.state.save(Path(directory))

    def load(self, directory: str | Path) -> None:
        with self._lock:
            optimizer_state, info = self.state.read(Path(directory))  # errors here stop before the group acts
        with self._group(("load", info)):
            self.state.load(optimizer_state, info)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.gathered:  # first let a generating batch finish: its passes need the group
            self.local.close()
        with self._lock:
            for remote in self.remotes:
                remote.close()
            if not self._broken:  # a broken group cannot take commands; its processes end with the server
                self.env.broadcast(("close",))
            self.state.close()
            self.state = None

    def __enter__(self) -> DistributedEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def generation_replicas(config: Any, env: DistEnv) -> str:
    """"on" or "off" for `model.generation_replicas` "auto": rank 0 decides before the boot from the
    memory estimate (engine/memory.py), so every rank builds the same thing."""
    if config.generation_replicas != "auto":
        return config.generation_replicas
    if env.device_type != "cuda" or env.world_size == 1:
        return "on"
    torch = require("torch")
    from vibe_rl.engine import memory
    from vibe_rl.engine.loader import resolve_model_path

    params, _ = memory.count_parameters(str(resolve_model_path(config.path, config.cache_dir)))
    gpu_gb = torch.cuda.get_device_properties(torch.device(env.device)).total_memory / memory.GIB
    fits = not params or memory.replicas_fit(params, env.world_size, config.lora.rank > 0, gpu_gb)
    if not fits:
        log.warning("no generation replicas: a full copy of the %.1fB model does not fit beside the training "
                    "shards on %d GPUs; generation gathers the sharded weights every step (slower)",
                    params / 1e9, env.world_size)
    return "on" if fits else "off"


def _pad_id(path: Any, model: Any) -> int:
    """The padding id a TorchEngine on this model uses (every rank pads training batches alike)."""
    from vibe_rl.engine.loader import load_tokenizer
    from vibe_rl.engine.torch_engine import _eos_ids

    tokenizer = load_tokenizer(path)
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(_eos_ids(tokenizer, model))


def _boot(env: DistEnv, config: Any, train: Any) -> tuple[RankState | None, list[str]]:
    """Build this rank's state; every rank learns whether all ranks succeeded."""
    state, error = None, None
    try:
        state = RankState(env, config, train)
    except Exception as exc:  # reported to every rank below, so no rank waits for a broken one
        log.exception("rank %d failed to boot the engine", env.rank)
        error = f"rank {env.rank}: {type(exc).__name__}: {exc}"
    errors = [e for e in env.all_gather(error) if e]
    return state, errors


def worker_loop(env: DistEnv) -> None:
    """Ranks 1..: follow rank 0's commands until it says exit (or goes away)."""
    from vibe_rl.engine.replicas import ReplicaServer

    state: RankState | None = None
    while True:
        cmd, *args = env.broadcast()
        if cmd == "boot":
            config, train, key = args
            state, errors = _boot(env, config, train)
            if state is not None and not errors and not state.gathered:
                state.server = ReplicaServer(state.replica, env.node_address(), key)
            env.gather(state.server.address if state is not None and state.server else None)
            if errors and state is not None:
                state.close()
                state = None
            if state is not None:
                env.all_gather(env.describe())
        elif cmd == "forward":
            state.forward()
        elif cmd == "train":
            state.train(args[0])
        elif cmd == "save":
            state.save(None)
        elif cmd == "load":
            state.load(None, args[0])
        elif cmd == "close":
            if state is not None:
                state.close()
            state = None
        elif cmd == "exit":
            if state is not None:
                state.close()
            return
