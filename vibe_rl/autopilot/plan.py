"""How `vibe-rl run` lays out a project's sessions: names, commands, GPUs, the CPU path, ports."""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from vibe_rl.autopilot.sessions import SessionSpec, TmuxSessions
from vibe_rl.autopilot.watcher import ServerView
from vibe_rl.errors import ConfigError
from vibe_rl.schema.spec import TaskSpec

CPU_OVERRIDES = ["train.batch_size=2", "train.grpo_n=2", "rollout.max_tokens=16"]
CPU_MAX_TOKENS = "16"


class RunOptions(BaseModel):
    """How one `vibe-rl run` behaves (the CLI flags)."""

    project_dir: Path = Field(description="Project folder holding task_spec.json")
    mode: str | None = Field(default=None, description="Run mode; None: the spec's first mode")
    until: str = Field(default="first-step", description="'first-step' or 'steps:N': the global step to reach")
    timeout: float = Field(default=1800.0, gt=0, description="Seconds to wait for the target step")
    fix: Literal["auto", "off"] = Field(default="auto", description="Ask the configured LLM for fixes, or only diagnose")
    stop_after: bool = Field(default=False, description="End the project's sessions when the run ends")
    max_fixes: int = Field(default=5, ge=0, description="Most LLM fix answers per run")
    same_failure_limit: int = Field(default=3, ge=1, description="Stop when one failure has been seen this often")
    ready_timeout: float = Field(default=300.0, gt=0, description="Seconds for the servers to answer /healthz")
    poll_s: float = Field(default=1.0, gt=0, description="Seconds between looks at status and logs")
    device: Literal["auto", "cpu", "gpu"] = Field(default="auto", description="auto: CPU path when no GPU is visible")
    overrides: list[str] = Field(default_factory=list, description="key.sub=value job overrides for every server")
    socket_name: str | None = Field(default=None, description="tmux socket (-L); None: $VIBE_RL_TMUX_SOCKET or default")


def parse_until(until: str) -> int:
    if until == "first-step":
        return 1
    if until.startswith("steps:") and until[6:].isdigit() and int(until[6:]) > 0:
        return int(until[6:])
    raise ConfigError(f"--until {until!r} is not understood: use 'first-step' or 'steps:N' (N >= 1)")


def visible_gpus() -> list[str]:
    """The GPU ids this process may use: CUDA_VISIBLE_DEVICES when set, else what nvidia-smi lists."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g.strip() for g in env.split(",") if g.strip() and g.strip() != "-1"]
    if not shutil.which("nvidia-smi"):
        return []
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return [str(i) for i, _ in enumerate(x for x in out.stdout.splitlines() if x.startswith("GPU "))]


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def session_names(spec: TaskSpec, mode: str | None = None) -> list[str]:
    return [spec.tmux_session(s.name) for s in spec.servers_for(mode)] + [spec.client_session]


def stop_sessions(project_dir: Path, socket_name: str | None = None) -> list[str]:
    """End this project's sessions (every mode's), and nothing else."""
    spec = TaskSpec.load(project_dir)
    tmux = TmuxSessions(socket_name)
    names = [spec.tmux_session(s.name) for s in spec.servers] + [spec.client_session]
    return [n for n in names if tmux.stop(n)]



def plan_sessions(spec: TaskSpec, mode: str, opts: RunOptions, server_venv: Path, client_venv: Path,
                  notes: list[str]) -> tuple[list[ServerView], SessionSpec]:
    """The sessions a mode runs: commands, GPUs (CUDA_VISIBLE_DEVICES), env; notes say what was assumed."""
    servers = spec.servers_for(mode)
    ids = visible_gpus()
    have = len(ids)
    cpu = opts.device == "cpu" or (opts.device == "auto" and have == 0)
    split = spec.gpu_split(mode)
    need = sum(len(v) for v in split.values())
    if not cpu and need > have:
        each = max(have // len(servers), 1)
        split = {s.name: list(range(i * each, (i + 1) * each)) for i, s in enumerate(servers)}
        notes.append(f"the spec asks for {need} GPUs but {have} are visible: {each} per server")
    if cpu:
        notes.append(
            "CPU run (no GPU visible or --device cpu): servers use the tiny offline model with small settings ("
            + ", ".join(CPU_OVERRIDES) + f", client max_tokens {CPU_MAX_TOKENS}); "
            "on a GPU machine they use the spec's model and GPUs")
    root = Path(opts.project_dir).resolve()
    views, client_env = [], {"PYTHONUNBUFFERED": "1"}
    for s in servers:
        cmd = (f"vibe-rl swarm start --port {s.port} --config {s.config} "
               f"--experiment-dir experiments/{s.name}")
        static_notes(spec, s, notes)
        sets = (CPU_OVERRIDES if cpu else []) + list(opts.overrides)
        cmd += " --model tiny" if cpu else ""
        cmd += "".join(f" --set {shlex.quote(o)}" for o in sets)
        gpus = [ids[i] if i < have else str(i) for i in split[s.name]]
        env = {"CUDA_VISIBLE_DEVICES": "" if cpu else ",".join(gpus), "PYTHONUNBUFFERED": "1"}
        sess = SessionSpec(spec.tmux_session(s.name), cmd, root, root / "logs", env, str(server_venv / "bin"))
        views.append(ServerView(s.name, s.url, sess))
        client_env[s.url_env] = s.url
    if cpu:
        client_env["VIBE_RL_MAX_TOKENS"] = CPU_MAX_TOKENS
    client = SessionSpec(spec.client_session, f"python {spec.mode(mode).script}", root, root / "logs",
                         client_env, str(client_venv / "bin"))
    return views, client


def static_notes(spec: TaskSpec, server, notes: list[str]) -> None:
    """Say up front which static opponents the server will serve locally (their API key env var is unset)."""
    for m in spec.static_models:
        if m.name in server.static_models and m.api_key_env and not os.environ.get(m.api_key_env):
            notes.append(f"static model {m.name!r}: {m.api_key_env} is not set, so server "
                         f"{server.name} serves it with a frozen local copy of its own model")
