"""`vibe-rl new`: a natural-language spec -> a TaskSpec -> a rendered project."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def new(
        spec: str | None = typer.Argument(None, help="The task in a few lines (Chinese or English)."),
        spec_file: Path | None = typer.Option(None, "--spec-file", "-f", help="Read the spec from this file."),
        out: Path | None = typer.Option(None, "--out", "-o", help="Project folder (default: generated/<slug>)."),
        name: str | None = typer.Option(None, "--name", help="Project slug, e.g. my_spy_game."),
        planner: str = typer.Option("auto", "--planner", help="offline | openai | anthropic | auto."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Plan only: print the TaskSpec, write nothing."),
        as_json: bool = typer.Option(False, "--json", help="Print the TaskSpec as JSON."),
        force: bool = typer.Option(False, "--force", help="Overwrite files in a non-empty --out folder."),
    ) -> None:
        """Turn a spec into a reviewable training project (game rules, agent_run/agent_roll, config, tests)."""
        from vibe_rl.errors import PlannerError
        from vibe_rl.planner import plan, resolve
        from vibe_rl.scaffold.render import render_project

        if (spec is None) == (spec_file is None):
            raise PlannerError('Give the spec either as an argument or with --spec-file, e.g. '
                               'vibe-rl new "who is spy, 8 GPUs, batch size 16".')
        if spec_file is not None:
            if not spec_file.is_file():
                raise PlannerError(f"--spec-file {spec_file} does not exist.")
            spec = spec_file.read_text(encoding="utf-8")
        task = plan(spec, planner=planner, name=name)
        if as_json:
            typer.echo(task.model_dump_json(indent=2))
        else:
            typer.echo(f"planner: {resolve(planner)}; family: {task.family}; project: {task.name}")
            for note in task.notes:
                typer.echo(f"note: {note}")
        if dry_run:
            return
        target = out or Path("generated") / task.name
        files = render_project(task, target, force=force)
        if not as_json:
            typer.echo(f"wrote {len(files)} files to {target}:")
            for path in files:
                typer.echo(f"  {path.relative_to(target)}")
            typer.echo(f"next: vibe-rl doctor {target} && vibe-rl run {target}")
