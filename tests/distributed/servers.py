"""Start `vibe-rl swarm start` as a process group of ranks (one node, or several nodes on this host)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from vibe_rl.swarm.launch import ServerNotReadyError, free_port, log_tail, spawn, wait_healthy

ROOT = Path(__file__).resolve().parents[2]


class RankedServer:
    """One server: `nodes` launcher commands (node ranks 0..nodes-1), node 0 serving HTTP on `port`."""

    def __init__(self, exp_dir: Path, sets: list[str], nproc: int, nodes: int = 1, model: str = "tiny",
                 gpus_per_node: list[str] | None = None):
        self.exp_dir, self.sets, self.nproc, self.nodes, self.model = Path(exp_dir), sets, nproc, nodes, model
        self.gpus_per_node = gpus_per_node
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen] = []
        self.logs = [self.exp_dir.parent / f"{self.exp_dir.name}-node{n}.log" for n in range(nodes)]

    def command(self, node: int, master_port: int) -> list[str]:
        cmd = [sys.executable, "-m", "vibe_rl", "swarm", "start", "--port", str(self.port), "--model", self.model,
               "--experiment-dir", str(self.exp_dir), "--nproc-per-node", str(self.nproc)]
        if self.nodes > 1:
            cmd += ["--nnodes", str(self.nodes), "--node-rank", str(node), "--master-addr", "127.0.0.1",
                    "--master-port", str(master_port)]
        for s in self.sets:
            cmd += ["--set", s]
        return cmd

    def start(self, timeout: float = 300) -> RankedServer:
        self.exp_dir.parent.mkdir(parents=True, exist_ok=True)
        master_port = free_port()
        self.procs = []
        for node in range(self.nodes):
            env = dict(os.environ)
            if self.gpus_per_node is not None:
                env["CUDA_VISIBLE_DEVICES"] = self.gpus_per_node[node]
            self.procs.append(spawn(self.command(node, master_port), self.logs[node], cwd=ROOT, env=env, append=True,
                                    new_session=True))
        try:
            wait_healthy(self.url, self.procs, timeout, interval=0.3)
        except ServerNotReadyError:
            self.stop()
            raise RuntimeError(f"ranked server did not come up:\n{self.output()}") from None
        return self

    def output(self) -> str:
        return "\n".join(f"--- node {n}\n" + log_tail(log, 4000) for n, log in enumerate(self.logs))

    def kill(self) -> None:
        """SIGKILL the launcher of every node only (like a crash); its ranks must die with it."""
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait(timeout=30)

    def group_alive(self) -> bool:
        """Whether any process of the launchers' sessions (ranks included) is still running."""
        for p in self.procs:
            try:
                os.killpg(p.pid, 0)
                return True
            except ProcessLookupError:
                continue
        return False

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
        for p in self.procs:  # nothing of the group may outlive the test
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
