"""`vibe-rl swarm plot EXPERIMENT_DIR`: reward (mean +- std) and loss per step, as a table and a PNG."""

from __future__ import annotations

import json
from pathlib import Path

import typer


def register_plot(swarm: typer.Typer) -> None:
    @swarm.command("plot")
    def plot(
        experiment_dir: Path = typer.Argument(..., help="An experiment dir (PROJECT/experiments/server1) holding "
                                                         "metrics.jsonl or swarm.sqlite."),
        out: Path = typer.Option(None, "--out", help="Image to write (.png, .svg, .pdf); default "
                                                     "EXPERIMENT_DIR/curves.png."),
        as_json: bool = typer.Option(False, "--json", help="Print the updates and the learning summary as JSON."),
    ) -> None:
        """Draw reward mean +- std, the eval win rate (95% interval) where logged, and loss per weight update with
        matplotlib; print the reward per step and the eval win rates."""
        from vibe_rl.swarm.observe import curves

        if out is not None:  # before reading anything: matplotlib would write DIR.png, or fail with a traceback
            _check_out(out)
        updates = curves.load_updates(experiment_dir)
        summary = curves.learning(updates)
        path = curves.draw(updates, out or experiment_dir / "curves.png", title=str(experiment_dir))
        if as_json:
            typer.echo(json.dumps({"updates": updates, "learning": summary, "image": str(path)}, default=str))
            return
        typer.echo(curves.table(updates))
        wins = curves.eval_table(updates)
        if wins:
            typer.echo(wins)
        if summary:
            typer.echo(f"reward: mean of the first 3 updates {summary['first_mean']}, of the last 3 "
                       f"{summary['last_mean']} (margin {summary['margin']:+})")
        typer.echo(f"curves: {path}")


IMAGE_SUFFIXES = (".png", ".svg", ".pdf", ".jpg", ".jpeg", ".eps", ".ps", ".webp", ".tif", ".tiff")


def _check_out(out: Path) -> None:
    from vibe_rl.errors import ConfigError

    if out.is_dir():
        raise ConfigError(f"--out {out} is a folder; pass an image file, e.g. --out {out / 'curves.png'}.")
    if out.suffix.lower() not in IMAGE_SUFFIXES:
        raise ConfigError(f"--out {out}: '{out.suffix or 'no suffix'}' is not an image format. End the name with "
                          ".png, .svg or .pdf, e.g. --out curves.png.")
