"""`vibe-rl skills install`: put the skills under `skills/` into Claude Code and/or OpenCode.

A thin wrapper around the real installer (the `skills` package on npm, run through npx
with Node 22) so users need not remember its flags:

    npx -y -p node@22 -p skills skills add <source> --skill '*' -a <agent> ... -y [-g]

Without `--global` the skills land in the current directory's project
(`.agents/skills/<name>/`, which OpenCode reads, symlinked into `.claude/skills/`);
with `--global` they land under the home directory instead.
"""

from __future__ import annotations

import shutil
import subprocess
from enum import Enum
from pathlib import Path

import typer

from vibe_rl.errors import VibeRLError

AGENTS = ("claude-code", "opencode")


class Agent(str, Enum):
    claude_code = "claude-code"
    opencode = "opencode"
    all = "all"


class SkillsInstallError(VibeRLError, RuntimeError):
    """The skills installer could not run or failed."""


def default_source() -> Path:
    """The checkout this vibe-rl runs from: the folder that holds `skills/`."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "skills").is_dir():
        raise SkillsInstallError(
            f"No skills/ folder next to the vibe-rl package ({root}); this install was not made from a "
            "checkout. Pass --source with a checkout path or a GitHub '<owner>/<repo>'."
        )
    return root


def resolve_source(source: str | None) -> str:
    """A local path (made absolute and checked) or a remote source passed through unchanged."""
    if source is None:
        return str(default_source())
    path = Path(source).expanduser()
    if path.exists():
        if not (path / "skills").is_dir() and not (path / "SKILL.md").is_file():
            raise SkillsInstallError(
                f"{path} holds neither a skills/ folder nor a SKILL.md; point --source at a vibe-rl checkout."
            )
        return str(path.resolve())
    if source.startswith((".", "/", "~")):
        raise SkillsInstallError(f"--source {source}: no such folder. Give an existing path or '<owner>/<repo>'.")
    return source  # e.g. "owner/repo" or a git URL: the installer fetches it


def installer_command(source: str, agent: Agent, global_: bool, npx: str = "npx") -> list[str]:
    """The exact installer argv (kept separate so tests and users can read it)."""
    agents = AGENTS if agent is Agent.all else (agent.value,)
    cmd = [npx, "-y", "-p", "node@22", "-p", "skills", "skills", "add", source, "--skill", "*"]
    for name in agents:
        cmd += ["-a", name]
    cmd.append("-y")
    if global_:
        cmd.append("-g")
    return cmd


def install(
    agent: Agent = typer.Option(Agent.all, "--agent", "-a", help="Which coding agent gets the skills."),
    global_: bool = typer.Option(
        False, "--global", "-g", help="Install for your user (home directory) instead of the current project."
    ),
    source: str | None = typer.Option(
        None, "--source", help="A checkout path or a GitHub '<owner>/<repo>' (default: this checkout)."
    ),
) -> None:
    """Install every vibe-rl skill for Claude Code and/or OpenCode (uses npx and Node 22 from npm)."""
    npx = shutil.which("npx")
    if npx is None:
        raise SkillsInstallError(
            "npx was not found on PATH. The skills installer runs on Node.js: install Node.js (which "
            "ships npm and npx, e.g. `apt-get install nodejs npm` or https://nodejs.org), then rerun "
            "`vibe-rl skills install`."
        )
    cmd = installer_command(resolve_source(source), agent, global_, npx=npx)
    where = "your home directory" if global_ else f"the project in {Path.cwd()}"
    typer.echo(f"Installing vibe-rl skills into {where}:\n  {' '.join(_quote(c) for c in cmd)}")
    result = subprocess.run(cmd, check=False)
    if result.returncode != 0:
        raise SkillsInstallError(
            f"the skills installer exited with code {result.returncode} (its output is above). The first run "
            "downloads Node 22 and the `skills` package from npm: check that the npm registry is reachable."
        )
    root = Path.home() if global_ else Path.cwd()
    places = {"claude-code": root / ".claude" / "skills", "opencode": root / ".agents" / "skills"}
    chosen = AGENTS if agent is Agent.all else (agent.value,)
    typer.echo("Done: " + ", ".join(f"{name} reads {places[name]}" for name in chosen)
               + ". Restart the coding agent so it picks up the skills.")


def _quote(arg: str) -> str:
    return f"'{arg}'" if arg == "*" else arg


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="The skills pack for coding agents (Claude Code, OpenCode).", no_args_is_help=True)
    group.command("install")(install)
    app.add_typer(group, name="skills")
