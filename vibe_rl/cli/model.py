"""`vibe-rl model tiny DIR`: write the offline tiny model (no download) to a directory."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="Model utilities (the offline tiny model).", no_args_is_help=True)

    @group.command("tiny")
    def tiny(
        directory: Path = typer.Argument(..., help="Where to write the HF model directory."),
        seed: int = typer.Option(0, help="Seed of the random weights."),
        force: bool = typer.Option(False, "--force", help="Write even if DIR is not empty."),
    ) -> None:
        """Build the tiny Qwen2 model: local byte-level BPE tokenizer, Qwen2.5-style chat template with
        tools, random weights (< 5M parameters). Use the directory as `model.path` like any HF model."""
        from vibe_rl.engine.tiny import write_tiny_model
        from vibe_rl.errors import ConfigError

        if directory.exists() and any(directory.iterdir()) and not force:
            raise ConfigError(f"{directory} is not empty. Pick a new directory or pass --force to write into it.")
        n_params = write_tiny_model(directory, seed=seed)
        typer.echo(f"Wrote the tiny model to {directory} ({n_params:,} parameters, {n_params} exactly).")

    app.add_typer(group, name="model")
