"""`vibe-rl doctor`: static checks of a project; exit 1 when any error is found."""

from __future__ import annotations

import json
from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def doctor(
        project: Path = typer.Argument(..., help="Project folder, e.g. generated/who_is_spy."),
        as_json: bool = typer.Option(False, "--json", help="Print findings as JSON."),
    ) -> None:
        """Check a project: compiles, English-only code, task ids, batch/group sizes, team wiring, player tags; say
        which engine each server runs and why."""
        from vibe_rl.engine.choice import project_engines
        from vibe_rl.scaffold.doctor import diagnose

        findings = diagnose(project)
        engines = project_engines(project)
        errors = sum(f.level == "error" for f in findings)
        if as_json:
            typer.echo(json.dumps({"ok": errors == 0, "errors": errors, "warnings": len(findings) - errors,
                                   "findings": [f.model_dump() for f in findings], "engines": engines}, indent=2))
        else:
            for finding in findings:
                typer.echo(str(finding))
            for e in engines:  # model.engine resolved (auto: torch or vllm), with the reason
                typer.echo(f"engine: {e['config']} ({e['server']}): {e['engine']}, because {e['reason']}")
            typer.echo(f"{project}: {errors} error(s), {len(findings) - errors} warning(s)")
        if errors:
            raise typer.Exit(1)
