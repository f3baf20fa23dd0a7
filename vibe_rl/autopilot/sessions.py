"""tmux sessions on libtmux: one per server and one for the client.

Each session runs a plain bash; the command is written to a launcher script
(`DIR/logs/<session>.sh`) and typed into the pane, so a person who attaches can
rerun it with the up arrow. Pane output is also appended to `DIR/logs/<session>.log`
through `tmux pipe-pane`. After the command the launcher prints an exit marker
the watcher reads (`__VIBE_RL_EXIT__ <status>`).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from vibe_rl.autopilot.diagnose import EXIT_MARK
from vibe_rl.errors import VibeRLError
from vibe_rl.extras import require

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[()][A-Za-z0-9]|\r")
# Not forwarded into sessions: tmux's own variables and per-shell state.
_START_MARK = "===== vibe-rl: session"
_MAX_READ = 4 << 20  # bytes of a log read at most (its tail)
_SKIP_ENV = {"TMUX", "TMUX_PANE", "PWD", "OLDPWD", "SHLVL", "_", "PS1", "PROMPT_COMMAND",
             "SHELLOPTS", "BASHOPTS", "BASH_VERSINFO", "EUID", "UID", "PPID"}  # the last: read-only in bash


class SessionError(VibeRLError, RuntimeError):
    """A tmux session could not be started or read."""


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SESSION_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def _write_private(path: Path, text: str) -> None:
    """Write `text` to a fresh file of mode 0600 (an old file or a planted link is removed first, never followed)."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)


@dataclass
class SessionSpec:
    """What one tmux session runs."""

    name: str
    command: str
    cwd: Path
    log_dir: Path
    env: dict[str, str] = field(default_factory=dict)  # non-secret, written into the launcher
    path_prefix: str = ""  # prepended to PATH (a venv's bin)

    @property
    def log(self) -> Path:
        return self.log_dir / f"{self.name}.log"

    @property
    def launcher(self) -> Path:
        return self.log_dir / f"{self.name}.sh"

    @property
    def env_file(self) -> Path:
        """The environment of the `vibe-rl run` process (API keys too), mode 0600, sourced by the launcher."""
        return self.log_dir / f"{self.name}.env"


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


class TmuxSessions:
    """Start, read and stop named tmux sessions (optionally on a private tmux socket)."""

    def __init__(self, socket_name: str | None = None):
        self.socket_name = socket_name or os.environ.get("VIBE_RL_TMUX_SOCKET", "").strip() or None
        libtmux = require("libtmux", "the tmux sessions of `vibe-rl run`")
        if not shutil.which("tmux"):
            raise SessionError("tmux is not installed: install it (e.g. apt-get install tmux), then rerun")
        self._server = libtmux.Server(socket_name=self.socket_name)
        self._env_files: dict[str, Path] = {}  # session -> its env file (removed when the session is stopped)

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self, spec: SessionSpec) -> None:
        """(Re)start `spec.name`: kill a previous session of that exact name, then run the command."""
        self.stop(spec.name)
        spec.log_dir.mkdir(parents=True, exist_ok=True)
        self._write_launcher(spec)
        with spec.log.open("a", encoding="utf-8") as fh:  # a restart appends; readers start at the mark
            fh.write(f"\n{_START_MARK} {spec.name} started {time.strftime('%Y-%m-%d %H:%M:%S')} =====\n")
        # The environment (API keys among it) reaches the session through a 0600 file the launcher sources, never
        # through `tmux new-session -e K=V`, whose arguments every local user can read in `ps`.
        self._env_files[spec.name] = spec.env_file
        _write_private(spec.env_file, "".join(f"export {k}={shlex.quote(v)}\n" for k, v in os.environ.items()
                                              if k not in _SKIP_ENV and _ENV_NAME.fullmatch(k)))
        try:
            session = self._server.new_session(
                session_name=spec.name, start_directory=str(spec.cwd),
                window_command="bash --noprofile --norc", x=200, y=50)
        except Exception as exc:  # libtmux raises its own exception types
            raise SessionError(f"Could not start tmux session {spec.name}: {exc}. Is tmux installed?") from exc
        pane = session.active_pane
        pane.cmd("pipe-pane", "-o", f"cat >> {shlex.quote(str(spec.log))}")
        pane.send_keys(f"bash {shlex.quote(str(spec.launcher))}", enter=True)

    def stop(self, name: str) -> bool:
        """Kill the session called exactly `name`; True if there was one. The env file of a session this object
        started goes with it (secrets do not stay on disk longer than their session)."""
        env_file = self._env_files.pop(name, None)
        if env_file is not None:
            env_file.unlink(missing_ok=True)
        if not self.exists(name):
            return False
        self._server.cmd("kill-session", "-t", f"={name}")
        return True

    def exists(self, name: str) -> bool:
        return self._server.cmd("has-session", "-t", f"={name}").returncode == 0

    # -- reading -----------------------------------------------------------------------------
    def read_log(self, spec: SessionSpec, since_start: bool = True) -> str:
        """The session's output (ANSI stripped); by default only what its latest start wrote."""
        if not spec.log.exists():
            return ""
        with spec.log.open("rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - _MAX_READ))
            text = fh.read().decode("utf-8", "replace")
        if since_start and _START_MARK in text:
            text = text[text.rindex(_START_MARK):]
        return strip_ansi(text)

    def capture(self, name: str, lines: int = 200) -> str:
        """What the pane shows now (a fallback when the log is empty)."""
        if not self.exists(name):
            return ""
        res = self._server.cmd("capture-pane", "-p", "-J", "-S", f"-{lines}", "-t", f"={name}:")
        return strip_ansi("\n".join(res.stdout))

    def attach_hint(self, name: str) -> str:
        sock = f"-L {self.socket_name} " if self.socket_name else ""
        return f"tmux {sock}attach -t {name}"

    # -- helpers -----------------------------------------------------------------------------
    @staticmethod
    def _write_launcher(spec: SessionSpec) -> None:
        if not _SESSION_NAME.fullmatch(spec.name):
            raise SessionError(f"tmux session name {spec.name!r} may hold only letters, digits, '_', '.', '-'; fix "
                               "short_name or the server names in task_spec.json")
        bad = [k for k in spec.env if not _ENV_NAME.fullmatch(k)]
        if bad:
            raise SessionError(f"Environment variable name {bad[0]!r} of session {spec.name} is not a shell name "
                               "(letters, digits, '_'): fix url_env in task_spec.json")
        lines = ["#!/usr/bin/env bash", f"# vibe-rl autopilot launcher for tmux session {spec.name}",
                 f"if [ -f {shlex.quote(str(spec.env_file))} ]; then . {shlex.quote(str(spec.env_file))}; fi",
                 f"cd {shlex.quote(str(spec.cwd))}"]
        if spec.path_prefix:
            lines.append(f'export PATH={shlex.quote(spec.path_prefix)}:"$PATH"')
        lines += [f"export {k}={shlex.quote(v)}" for k, v in spec.env.items()]
        lines += [f"echo {shlex.quote('[vibe-rl] ' + spec.name + ': ' + spec.command)}",
                  f"( {spec.command} )", f'echo "{EXIT_MARK} $?"']  # a subshell: the marker always prints
        spec.launcher.write_text("\n".join(lines) + "\n", encoding="utf-8")
