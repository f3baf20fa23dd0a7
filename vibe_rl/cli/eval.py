"""`vibe-rl eval DIR --checkpoints ...`: a cross-play table of a project's checkpoints (every model frozen)."""

from __future__ import annotations

import json
from pathlib import Path

import typer


def _split(values: list[str]) -> list[str]:
    return [v for item in values for v in item.replace(",", " ").split()]


def register(app: typer.Typer) -> None:
    @app.command("eval")
    def eval_(
        project: Path = typer.Argument(..., help="Project folder (holds task_spec.json)."),
        more: list[str] = typer.Argument(None, metavar="CHECKPOINT",
                                         help="More rows, after the project or --checkpoints (`-c initial 20 latest`)."),
        checkpoints: list[str] = typer.Option([], "--checkpoints", "-c", help=(
            "Checkpoints of the table: 'initial' (the model before training), a step (20 or step_20), 'latest'; "
            "comma- or space-separated, repeatable.")),
        opponents: list[str] = typer.Option([], "--opponents", help=(
            "The columns' checkpoints, when they differ from the rows': comma-separated or repeated "
            "(--opponents initial,10).")),
        games: int = typer.Option(40, "--games", "-n", min=1, help=(
            "Games per cell: the last N tasks of the dataset, the same games (and seeds) in every cell.")),
        side: str = typer.Option(None, "--side", help="Role whose win the rows count (its team plays the row)."),
        mode: str = typer.Option(None, "--mode", help="Run mode whose episode code, server and config are used."),
        experiment_dir: Path = typer.Option(None, "--experiment-dir", help="Experiment holding checkpoints/."),
        model: str = typer.Option(None, "--model", help="tiny|smollm2|PATH: the initial model (and base)."),
        set_: list[str] = typer.Option([], "--set", help="key.sub=value overrides of the eval server's job."),
        max_tokens: int = typer.Option(None, "--max-tokens", min=1, help="Tokens per answer (server and players)."),
        parallel: int = typer.Option(8, "--parallel", min=1, help="Games played at once."),
        seed: int = typer.Option(10_000, "--seed", help="Seed of the first game (game i plays seed + i)."),
        work_dir: Path = typer.Option(None, "--work-dir", help="Where the eval server's log and records go."),
        as_json: bool = typer.Option(False, "--json", help="Print the table as one JSON object instead of text."),
        out: Path = typer.Option(None, "--out", help="Also write the JSON to this file."),
    ) -> None:
        """Cross-play table: the learner side plays each row's checkpoint, the opponents each column's.

        Each cell: the row side's win rate over the same held-out eval games, with its 95% Wilson interval.

        A throwaway server serves every checkpoint frozen (LoRA ones merged): nothing is trained or written.
        """
        from vibe_rl.autopilot.crossplay import crossplay
        from vibe_rl.cli.checks import check_overrides, check_project
        from vibe_rl.swarm.observe.crossplay import table_text

        check_project(project)
        check_overrides(list(set_))  # a malformed or misspelt --set fails now, not when the server starts
        picked = _split(checkpoints) + list(more or [])
        table = crossplay(project, picked or ["initial", "latest"], _split(opponents) or None, games, mode=mode,
                          experiment_dir=experiment_dir, side=side, model=model, sets=list(set_),
                          max_tokens=max_tokens, seed=seed, parallel=parallel, work_dir=work_dir)
        text = json.dumps(table)
        if out:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text + "\n")
        if as_json:
            typer.echo(text)
            return
        typer.echo(f"{table['side']} win rate, 95% Wilson interval, {games} game(s) per cell "
                   f"(rows: {', '.join(table['side_roles'])}; columns: {', '.join(table['opponent_roles'])})")
        typer.echo(table_text(table))
        failed = sum(c["errors"] for line in table["cells"] for c in line)
        undecided = sum(c["undecided"] for line in table["cells"] for c in line)
        if failed or undecided:
            typer.echo(f"note: {failed} game(s) failed and {undecided} reported no win; they are not in the rates")
        typer.echo(f"[vibe-rl] server log and records: {table['work_dir']}" + (f"; JSON: {out}" if out else ""))
