"""The `vibe-rl` command line. Each command group lives in its own module and is
registered here; modules import their heavy dependencies inside the commands."""

from __future__ import annotations

import typer
import typer.main

from vibe_rl import __version__

app = typer.Typer(
    name="vibe-rl",
    help="From an RL idea to a running GRPO training in minutes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"vibe-rl {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """vibe-rl: new (spec -> project), run (tmux autopilot), doctor, eval (cross-play), swarm (server), model, skills."""


_registered = False


def get_app() -> typer.Typer:
    """The app with every command group registered (idempotent)."""
    global _registered
    if _registered:
        return app
    _registered = True
    from vibe_rl.cli import doctor, model, new, run, skills, swarm
    from vibe_rl.cli import eval as eval_cmd  # issue 29
    from vibe_rl.cli import export as export_cmd  # issue 15
    from vibe_rl.cli import init as init_cmd  # issue 13
    from vibe_rl.cli import play as play_cmd
    from vibe_rl.cli import schema as schema_cmd
    from vibe_rl.cli import status as status_cmd
    from vibe_rl.cli import traces as traces_cmd

    for module in (model, swarm, new, doctor, run, skills, status_cmd, init_cmd, schema_cmd, play_cmd,
                   export_cmd, traces_cmd, eval_cmd):
        module.register(app)
    return app


def main() -> None:
    from vibe_rl.cli.helptext import polish
    from vibe_rl.errors import VibeRLError

    try:
        polish(typer.main.get_command(get_app()))(prog_name="vibe-rl")  # --help: defaults and examples
    except VibeRLError as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        raise SystemExit(2) from None
    except OSError as exc:  # a file system refusal (permission, full disk, a file where a folder should be)
        hint = (f": {exc.filename}. Check that path (it must exist and be writable by you) and run the command "
                "again." if exc.filename else "")
        typer.secho(f"error: {exc.strerror or exc}{hint}", fg=typer.colors.RED, err=True)
        raise SystemExit(2) from None
