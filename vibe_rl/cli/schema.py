"""`vibe-rl schema taskspec`: the JSON schema of task_spec.json, for hand-written projects and checks."""

from __future__ import annotations

import json
from pathlib import Path

import typer


def taskspec_schema() -> dict:
    from vibe_rl.schema.spec import TaskSpec

    return TaskSpec.model_json_schema()


def register(app: typer.Typer) -> None:
    schema = typer.Typer(help="JSON schemas of the files vibe-rl reads.", no_args_is_help=True)
    app.add_typer(schema, name="schema")

    @schema.command("taskspec")
    def taskspec(out: Path = typer.Option(None, "--out", help="Write the schema to this file instead of stdout.")) -> None:
        """The JSON schema of task_spec.json (every field with its description)."""
        text = json.dumps(taskspec_schema(), indent=2, ensure_ascii=False) + "\n"
        if out is None:
            typer.echo(text, nl=False)
        else:
            out.write_text(text, encoding="utf-8")
            typer.echo(f"[vibe-rl] wrote {out}")
