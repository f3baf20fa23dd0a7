"""Issue 25 items 2 and 3: `vibe-rl run`'s tmux launchers. Spec values never reach a shell unquoted (each of the
four fields that used to be pasted is refused before a launcher is written, and the launcher quotes what it
writes); secrets reach the sessions through a 0600 file, never through tmux's command line (real tmux)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from vibe_rl.autopilot.plan import RunOptions, plan_sessions
from vibe_rl.autopilot.sessions import SessionError, SessionSpec, TmuxSessions
from vibe_rl.errors import ConfigError
from vibe_rl.planner.offline import OfflinePlanner
from vibe_rl.scaffold.render import render_project


@pytest.fixture
def tmux_socket():
    if not shutil.which("tmux"):
        pytest.skip("tmux is not installed")
    name = f"vibe-rl-sec-{uuid.uuid4().hex[:8]}"
    yield name
    subprocess.run(["tmux", "-L", name, "kill-server"], capture_output=True)  # our private server only
    (Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}" / name).unlink(missing_ok=True)


def _wait_for(pred, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.1)
    return False


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("launch") / "p"
    render_project(OfflinePlanner().plan("who is spy, batch size 8"), out)
    return out


def _injected(marker: Path) -> dict[str, callable]:
    cmd = f"touch {marker}"

    def name(spec):
        spec.servers[0].name = f"s1;{cmd};"
        for m in spec.modes:
            m.servers = [spec.servers[0].name if s == "server1" else s for s in m.servers]

    def config(spec):
        spec.servers[0].config = f"config.yaml;{cmd};.yaml"

    def url_env(spec):
        spec.servers[0].url_env = f"X=1;{cmd};Y"

    def script(spec):
        spec.modes[0].script = f"agent_roll.py;{cmd};.py"

    return {"servers[0].name": name, "servers[0].config": config, "servers[0].url_env": url_env,
            "modes[0].script": script}


@pytest.mark.parametrize("field", list(_injected(Path("/x"))))
def test_spec_fields_never_reach_a_shell(project, tmp_path, field):
    from vibe_rl.schema import TaskSpec

    marker = tmp_path / "marker"
    spec = TaskSpec.load(project)
    _injected(marker)[field](spec)
    opts = RunOptions(project_dir=project, device="cpu")
    with pytest.raises(ConfigError, match="refused") as info:
        plan_sessions(spec, spec.modes[0].name, opts, tmp_path / "sv", tmp_path / "cv", [])
    assert field.split("[")[0] in str(info.value)
    assert not marker.exists()


def test_launcher_quotes_what_it_writes(project, tmp_path, tmux_socket):
    """A valid spec: every value in the launchers is quoted (the client runs, the command line is intact);
    and the launcher itself refuses an env var name that is no shell name (real tmux)."""
    from vibe_rl.schema import TaskSpec

    spec = TaskSpec.load(project)
    views, client = plan_sessions(spec, spec.modes[0].name, RunOptions(project_dir=project, device="cpu"),
                                  tmp_path / "sv", tmp_path / "cv", [])
    assert "--config config.yaml --experiment-dir experiments/server1" in views[0].session.command
    marker = tmp_path / "marker"
    tmux = TmuxSessions(tmux_socket)
    bad = SessionSpec("sec-bad-env", "true", tmp_path, tmp_path / "logs", {f"X;touch {marker};Y": "1"})
    with pytest.raises(SessionError, match="not a shell name"):
        tmux.start(bad)
    assert not marker.exists()


def test_secrets_are_not_on_tmux_command_lines(tmp_path, tmux_socket, monkeypatch):
    """Every tmux invocation is recorded by a shim in front of the real tmux: the secret of the environment is
    on none of their command lines, yet the session sees it (through its 0600 env file)."""
    real = shutil.which("tmux")
    shim_dir, argv_log = tmp_path / "shim", tmp_path / "argv.log"
    shim_dir.mkdir()
    (shim_dir / "tmux").write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {argv_log}\nexec {real} "$@"\n')
    (shim_dir / "tmux").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim_dir}:{os.environ['PATH']}")
    secret = "sk-secret-" + uuid.uuid4().hex
    monkeypatch.setenv("DASHSCOPE_API_KEY", secret)
    out = tmp_path / "seen"
    spec = SessionSpec("sec-secret-client", f'printf %s "$DASHSCOPE_API_KEY" > {out}', tmp_path, tmp_path / "logs")
    tmux = TmuxSessions(tmux_socket)
    tmux.start(spec)
    assert _wait_for(lambda: "__VIBE_RL_EXIT__" in tmux.read_log(spec)), tmux.read_log(spec)
    assert stat.S_IMODE(spec.env_file.stat().st_mode) == 0o600
    tmux.stop(spec.name)
    assert not spec.env_file.exists()  # the secrets go with the session
    assert out.read_text() == secret  # the session got the variable
    recorded = argv_log.read_text()
    assert "new-session" in recorded  # the shim saw tmux's command lines
    assert secret not in recorded
    assert secret not in spec.launcher.read_text()


def test_play_runs_no_script_outside_the_project(project, tmp_path):
    """`vibe-rl play` starts the spec's script too: one outside the project is refused before anything runs."""
    import json

    from vibe_rl.autopilot.play import play

    marker = tmp_path / "marker"
    evil = tmp_path / "evil.py"
    evil.write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    copy = tmp_path / "p"
    shutil.copytree(project, copy)
    data = json.loads((copy / "task_spec.json").read_text())
    data["modes"][0]["script"] = str(evil)
    (copy / "task_spec.json").write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="modes\\[0\\].script"):
        play(copy, device="cpu", timeout=60, out=lambda line: None)
    assert not marker.exists()
