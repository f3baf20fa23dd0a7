"""`vibe-rl play DIR`: play one episode of a project against throwaway servers and show every call.

The mode's servers are started on free loopback ports with a temporary experiment folder (the
project's own `experiments/` and running sessions are not touched; on CPU the tiny model with the
run's CPU caps), the mode's script runs as the client, and the first episode that ends (of `--task`
when given) is read back from the server's own records: for each call, the player tag, the prompt's
last message, the reply and the action parsed from it (a tool call, or none).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from vibe_rl.autopilot import identity
from vibe_rl.autopilot.plan import cpu_overrides, visible_gpus
from vibe_rl.errors import VibeRLError
from vibe_rl.schema.spec import TaskSpec
from vibe_rl.swarm.launch import ServerNotReadyError, spawn, stop, wait_healthy

CLI = [sys.executable, "-c", "from vibe_rl.cli import main; main()"]


class PlayError(VibeRLError, RuntimeError):
    """No episode could be played."""


def _ended_episode(db: Path, task: str | None):
    if not db.is_file():
        return None
    from vibe_rl.swarm.server.store import Store

    store = Store(db)
    try:
        done = [e for e in store.untrained(-1) if task is None or e.task_id == task]
    finally:
        store.close()
    return done[0] if done else None


def play(project: Path, mode: str | None = None, task: str | None = None, timeout: float = 300.0,
         device: str = "auto", out=print):
    """Play until one episode ends; print it call by call. Returns the CompletedEpisode."""
    from vibe_rl.scaffold.plan_values import check_plan

    root = Path(project).resolve()
    spec = TaskSpec.load(root)
    check_plan(spec, root=root)  # the spec's files (config, script) stay inside the project (issue 25)
    m = spec.mode(mode)
    cpu = device == "cpu" or (device == "auto" and not visible_gpus())
    work = Path(tempfile.mkdtemp(prefix="vibe-rl-play-"))
    env = {k: v for k, v in os.environ.items() if k != "VIBE_RL_SWARM_TOKEN"} | {"PYTHONUNBUFFERED": "1"}
    procs, dbs, taken = [], [], set()
    from vibe_rl.autopilot.runner import _sigterm_as_interrupt

    restore = _sigterm_as_interrupt()  # `kill`/`timeout` end the play like Ctrl-C: its servers are stopped too
    try:
        for s in spec.servers_for(m.name):
            port = identity.next_free_port(identity.default_port(s.port, root) + 5, taken)
            taken.add(port)
            cmd = CLI + ["swarm", "start", "--port", str(port), "--config", str(root / s.config),
                         "--experiment-dir", str(work / s.name)]
            if cpu:
                sets, _ = cpu_overrides(root, s.config, [])
                cmd += ["--model", "tiny"] + [x for o in sets for x in ("--set", o)]
                env["VIBE_RL_MAX_TOKENS"] = str(16)
            gpus = "" if cpu else env.get("CUDA_VISIBLE_DEVICES", "")
            procs.append(spawn(cmd, work / f"{s.name}.log", cwd=root, env={**env, "CUDA_VISIBLE_DEVICES": gpus},
                               new_session=True))
            env[s.url_env] = f"http://127.0.0.1:{port}"
            dbs.append(work / s.name / "swarm.sqlite")
        deadline = time.monotonic() + timeout
        for s, proc in zip(spec.servers_for(m.name), procs, strict=True):
            try:
                wait_healthy(env[s.url_env], proc, deadline - time.monotonic(), work / f"{s.name}.log",
                             interval=0.5, tail_chars=2000)
            except ServerNotReadyError as e:
                raise PlayError(f"server {s.name} did not start: {e.log_tail}") from None
        out(f"[vibe-rl] playing mode {m.name} ({m.script}) against throwaway servers "
            f"{', '.join(env[s.url_env] for s in spec.servers_for(m.name))}" + (" (tiny model, CPU)" if cpu else ""))
        client = spawn([sys.executable, m.script], work / "client.log", cwd=root, env=env, new_session=True)
        procs.append(client)
        while True:
            episode = next((e for e in (_ended_episode(db, task) for db in dbs) if e is not None), None)
            if episode is not None:
                break
            if client.poll() is not None or time.monotonic() > deadline:
                why = "the client exited" if client.poll() is not None else f"no episode ended in {timeout:.0f} s"
                raise PlayError(f"{why}" + (f" (for task {task!r})" if task else "") + "; client output:\n"
                                + (work / "client.log").read_text()[-3000:])
            time.sleep(1.0)
    finally:
        for proc in reversed(procs):  # the client first; each with its process group
            stop(proc, grace=20.0, group=True, kill_wait=None)
        restore()
    show(episode, out)
    out(f"[vibe-rl] server and client output: {work}")
    return episode


def show(episode, out=print, width: int = 600) -> None:
    from vibe_rl.swarm.server.chat import parse_tool_calls

    out(f"[vibe-rl] episode {episode.episode_uuid}: task {episode.task_id}, reward {episode.reward}, "
        f"{len(episode.turns)} call(s)")
    for i, turn in enumerate(episode.turns, 1):
        last = turn.messages[-1] if turn.messages else {}
        kind = "static, context only" if turn.static else "trainable"
        out(f"--- call {i}: {turn.player or '(no user= tag)'} -> {turn.model or '?'} ({kind})")
        out(f"  prompt [{last.get('role', '?')}]: {str(last.get('content') or '')[-width:]}")
        out(f"  reply: {turn.response_text[:width]!r}")
        calls = parse_tool_calls(turn.response_text or "")[1]
        actions = "; ".join(f"{c['function']['name']}({c['function']['arguments']})" for c in calls)
        out(f"  action: {actions or 'none parsed (no valid tool call)'}")
