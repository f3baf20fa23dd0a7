"""`vibe-rl play DIR`: one episode against throwaway servers, each call's prompt, reply and parsed action."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    @app.command("play")
    def play(
        project: Path = typer.Argument(..., help="Project folder (holds task_spec.json)."),
        task: str = typer.Option(None, "--task", help="Show the first episode of this task id (default: any)."),
        mode: str = typer.Option(None, "--mode", help="Run mode (default: the first)."),
        timeout: float = typer.Option(300.0, "--timeout", min=1, help="Seconds to wait for an episode to end."),
        device: str = typer.Option("auto", "--device", help="'auto', 'cpu' (tiny model) or 'gpu'."),
    ) -> None:
        """Play one episode and print each player's prompt, reply and parsed action.

        The servers are temporary (free ports, a temporary experiment folder): a running training of the
        project is not touched."""
        from vibe_rl.autopilot.play import play as play_one
        from vibe_rl.cli.checks import check_project
        from vibe_rl.errors import ConfigError

        if device not in ("auto", "cpu", "gpu"):
            raise ConfigError(f"--device {device!r}: use 'auto', 'cpu' or 'gpu'")
        check_project(project)
        play_one(project, mode=mode, task=task, timeout=timeout, device=device, out=typer.echo)
