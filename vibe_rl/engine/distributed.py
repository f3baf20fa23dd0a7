"""Process groups for a server spread over several processes (one per GPU, or per CPU rank).

Layout: `torchrun` (PyTorch's launcher, started by `vibe-rl swarm start --nproc-per-node N` or
by hand for several nodes) starts one process per GPU and sets RANK / WORLD_SIZE / LOCAL_RANK /
MASTER_ADDR / MASTER_PORT. Rank 0 serves HTTP and drives; every other rank runs
`vibe_rl.engine.dist_engine.worker_loop` and follows the commands rank 0 broadcasts.

Two groups:

* the default group carries the training collectives (FSDP2 all-gather / reduce-scatter): NCCL
  for CUDA tensors (plus gloo for CPU tensors), or gloo alone on a CPU-only machine;
* a gloo *control* group carries the commands (boot, train, save, load, close, exit) as pickled
  objects. Its timeout is long because workers wait on it while the server idles between jobs.

Nothing here runs at import time; `init_from_env()` is called once per process.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime
import logging
import os
import signal
import socket
import sys
from dataclasses import dataclass, field
from typing import Any, NoReturn

from vibe_rl.errors import ConfigError
from vibe_rl.extras import require

CONTROL_TIMEOUT = datetime.timedelta(days=7)  # workers idle on the control group while no job runs
_ENV: DistEnv | None = None


@dataclass
class DistEnv:
    """This process's place in the group, and the groups themselves."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    backend: str  # "nccl" (GPUs) or "gloo" (CPU)
    device: str  # "cuda:<local_rank>" or "cpu"
    control: Any = field(default=None, repr=False)  # the gloo group for commands
    broken: bool = False  # a group command failed midway: the ranks are out of step

    @property
    def device_type(self) -> str:
        return "cuda" if self.device.startswith("cuda") else "cpu"

    @property
    def single_host(self) -> bool:
        return self.local_world_size == self.world_size

    def broadcast(self, obj: Any = None) -> Any:
        """Rank 0 sends `obj`; every rank returns it (pickled over the control group)."""
        dist = require("torch.distributed", "multi-GPU training")
        box = [obj if self.rank == 0 else None]
        dist.broadcast_object_list(box, src=0, group=self.control)
        return box[0]

    def gather(self, obj: Any) -> list[Any] | None:
        """Every rank sends `obj`; rank 0 gets the list in rank order, others None."""
        dist = require("torch.distributed", "multi-GPU training")
        out = [None] * self.world_size if self.rank == 0 else None
        dist.gather_object(obj, out, dst=0, group=self.control)
        return out

    def all_gather(self, obj: Any) -> list[Any]:
        dist = require("torch.distributed", "multi-GPU training")
        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj, group=self.control)
        return out

    def node_address(self) -> str:
        """Where other ranks reach this process's replica: loopback on one host, else this node's address."""
        if self.single_host:
            return "127.0.0.1"
        if os.environ.get("VIBE_RL_NODE_ADDR"):
            return os.environ["VIBE_RL_NODE_ADDR"]
        try:
            return socket.gethostbyname(socket.gethostname())
        except OSError as exc:
            raise ConfigError(f"This node's hostname does not resolve ({exc}); set VIBE_RL_NODE_ADDR to the address "
                              "rank 0 reaches this node at.") from exc

    def describe(self) -> dict[str, Any]:
        """What this rank runs on, for the server status (`devices`)."""
        gpu = None
        if self.device_type == "cuda":
            visible = [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]
            gpu = visible[self.local_rank] if self.local_rank < len(visible) else str(self.local_rank)
        return {"rank": self.rank, "host": socket.gethostname(), "device": self.device, "gpu": gpu}


def launched_by_torchrun() -> bool:
    return "LOCAL_RANK" in os.environ and "WORLD_SIZE" in os.environ and "RANK" in os.environ


def world_size() -> int:
    """WORLD_SIZE of this process (1 when not launched as part of a group)."""
    return int(os.environ.get("WORLD_SIZE", "1")) if launched_by_torchrun() else 1


def current() -> DistEnv | None:
    """The initialised group of this process, or None (single process)."""
    return _ENV


def init_from_env(device: str = "auto") -> DistEnv:
    """Join the group torchrun described in the environment (idempotent)."""
    global _ENV
    if _ENV is not None:
        return _ENV
    if not launched_by_torchrun():
        raise ConfigError("This process was not started by torchrun (RANK/WORLD_SIZE/LOCAL_RANK unset). Start "
                          "the server with `vibe-rl swarm start --nproc-per-node N`, or under torchrun.")
    torch = require("torch", "multi-GPU training")
    dist = require("torch.distributed", "multi-GPU training")
    rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    die_with_parent()
    use_cuda = device != "cpu" and torch.cuda.is_available()
    if device.startswith("cuda") and not use_cuda:
        raise ConfigError(f"model.device is {device!r} but this process sees no CUDA device.")
    if use_cuda:
        if local >= torch.cuda.device_count():
            raise ConfigError(f"Local rank {local} has no GPU: this node sees {torch.cuda.device_count()} GPU(s). "
                              "Start as many processes per node as GPUs (--nproc-per-node), or set "
                              "CUDA_VISIBLE_DEVICES to list enough GPUs.")
        torch.cuda.set_device(local)
        backend, dev = "cuda:nccl,cpu:gloo", f"cuda:{local}"
    else:
        backend, dev = "gloo", "cpu"
    if not dist.is_initialized():
        dist.init_process_group(backend=backend, rank=rank, world_size=world)
    control = dist.new_group(backend="gloo", timeout=CONTROL_TIMEOUT)
    _ENV = DistEnv(rank, world, local, local_world, "nccl" if use_cuda else "gloo", dev, control)
    return _ENV


def shutdown() -> None:
    """Leave the group (end of the process)."""
    global _ENV
    dist = require("torch.distributed", "multi-GPU training")
    if dist.is_initialized():
        dist.destroy_process_group()
    _ENV = None


def end_process(code: int = 0) -> NoReturn:
    """Leave the group and end this rank's process without the interpreter's finalization. A gloo worker
    thread may still hold a finished collective's tensors; dropping the last reference to one needs the GIL,
    and a thread taking the GIL while Python finalizes is ended mid-destructor: std::terminate, SIGABRT after
    all the work is done (4 of 76 exits of 2 CPU ranks in a loop). Logs and stdio are flushed first."""
    shutdown()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this rank when its launcher dies, so a killed server leaves no orphan
    holding the GPU or the port (prctl PR_SET_PDEATHSIG; a no-op elsewhere)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass


def torchrun_argv(args: list[str], nproc: int, nnodes: int, node_rank: int, master_addr: str,
                  master_port: int, python: str) -> list[str]:
    """The command that re-runs `vibe-rl <args>` as `nproc` processes on this node under torchrun."""
    return [python, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}", f"--nnodes={nnodes}",
            f"--node-rank={node_rank}", f"--master-addr={master_addr}", f"--master-port={master_port}",
            "--module", "vibe_rl", *args]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def visible_gpu_count() -> int:
    """GPUs this process may use: CUDA_VISIBLE_DEVICES when set, else what torch sees (0 without CUDA)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return len([g for g in env.split(",") if g.strip() and g.strip() != "-1"])
    try:
        torch = require("torch")
    except ImportError:
        return 0
    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
