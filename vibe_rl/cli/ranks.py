"""The process layout of `vibe-rl swarm start` on several GPUs or nodes.

`--nproc-per-node N` (default: every GPU this process sees) and `--nnodes/--node-rank/
--master-addr/--master-port` decide the group. With more than one process in total, the command
re-executes itself under torchrun (`python -m torch.distributed.run ... --module vibe_rl swarm
start ...`), which starts one process per GPU on this node; on several nodes, run the same
command on each node with its own --node-rank. Under torchrun, rank 0 serves HTTP and drives;
every other rank follows it (`vibe_rl.engine.dist_engine.worker_loop`) and never opens a port.
"""

from __future__ import annotations

import os
import signal
import sys

import typer

SINGLE, DRIVER, WORKER_DONE = "single", "driver", "worker-done"


def forces_cpu(sets: list[str], config: str | None) -> bool:
    """Whether the server's own overrides or --config job pin model.device to cpu."""
    if any(s.replace(" ", "") == "model.device=cpu" for s in sets):
        return True
    if config:
        import yaml

        try:
            data = yaml.safe_load(open(config, encoding="utf-8")) or {}  # noqa: SIM115
            return str((data.get("model") or {}).get("device", "")).strip() == "cpu"
        except (OSError, ValueError, AttributeError, yaml.YAMLError):
            return False
    return False


def start_ranks(nproc_per_node: int, nnodes: int, node_rank: int, master_addr: str, master_port: int,
                cpu: bool = False) -> str:
    """SINGLE (one process: serve as usual), DRIVER (rank 0 of a group: serve, then `finish`), or
    WORKER_DONE (this rank followed rank 0 until it exited). May replace the process with torchrun.
    `cpu`: the job runs on CPU, so the default is one process and ranks (if asked for) use gloo."""
    from vibe_rl.engine import distributed

    if distributed.launched_by_torchrun():
        if distributed.world_size() == 1:
            return SINGLE
        env = distributed.init_from_env("cpu" if cpu else "auto")
        if env.rank == 0:
            return DRIVER
        from vibe_rl.engine.dist_engine import worker_loop

        for sig in (signal.SIGINT, signal.SIGTERM):  # rank 0 decides when the group ends (or dies)
            signal.signal(sig, signal.SIG_IGN)
        try:
            worker_loop(env)
        finally:
            distributed.shutdown()
        return WORKER_DONE
    nproc = nproc_per_node or (1 if cpu else max(distributed.visible_gpu_count(), 1))
    if nproc * nnodes == 1:
        return SINGLE
    if nnodes > 1 and not master_port:
        raise typer.BadParameter("a multi-node server needs --master-port (the same on every node)",
                                 param_hint="--master-port")
    if node_rank >= nnodes:
        raise typer.BadParameter(f"--node-rank {node_rank} must be below --nnodes {nnodes}", param_hint="--node-rank")
    port = master_port or distributed.free_port()
    argv = distributed.torchrun_argv(sys.argv[1:], nproc, nnodes, node_rank, master_addr, port, sys.executable)
    typer.echo(f"note: starting {nproc} process(es) on this node ({nproc * nnodes} in all, node {node_rank} of "
               f"{nnodes}) under torchrun; rank 0 serves HTTP", err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, argv)
    raise AssertionError("unreachable")


def finish(role: str) -> None:
    """Rank 0 after serving: tell the workers to exit, leave the group."""
    if role != DRIVER:
        return
    from vibe_rl.engine import distributed

    env = distributed.current()
    if env is not None and env.broken:  # workers may sit in a collective: a non-zero exit makes torchrun end them
        typer.echo("error: the ranks are out of step after a failed command; exiting so torchrun ends them", err=True)
        sys.stdout.flush()
        os._exit(1)
    if env is not None:
        try:
            env.broadcast(("exit",))
        finally:
            distributed.shutdown()
