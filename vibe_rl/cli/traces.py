"""`vibe-rl traces serve|export EXPERIMENT_DIR`: read the recorded games of a run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    traces = typer.Typer(help="Read a run's recorded episodes: a web viewer, or an export.", no_args_is_help=True)
    app.add_typer(traces, name="traces")

    @traces.command("serve")
    def serve(
        experiment_dir: Path = typer.Argument(..., help="An experiment dir holding swarm.sqlite "
                                                         "(e.g. PROJECT/experiments/server1)."),
        port: int = typer.Option(8765, "--port", help="TCP port (0: any free port)."),
        host: str = typer.Option("127.0.0.1", "--host", help="Bind address (loopback by default)."),
    ) -> None:
        """Serve the trace viewer: episodes -> each player's conversation, models, rewards, weight versions."""
        from vibe_rl.swarm.traces import TraceReader
        from vibe_rl.swarm.ui import serve as serve_ui

        TraceReader(experiment_dir)  # fails early, with the fix, when there is no swarm.sqlite
        serve_ui(str(experiment_dir), host, port)

    @traces.command("export")
    def export(
        experiment_dir: Path = typer.Argument(..., help="An experiment dir holding swarm.sqlite."),
        fmt: str = typer.Option("jsonl", "--format", help="Output format: jsonl (one episode with its turns a line)."),
        out: Path = typer.Option(None, "--out", help="File to write (default: stdout)."),
    ) -> None:
        """Export every episode with its task, reward, metadata and turns (messages, answer, model, version)."""
        from vibe_rl.errors import ConfigError
        from vibe_rl.swarm.traces import TraceReader

        if fmt != "jsonl":
            raise ConfigError(f"--format {fmt!r} is not supported: use --format jsonl.")
        reader = TraceReader(experiment_dir)
        stream = out.open("w", encoding="utf-8") if out else sys.stdout
        count = 0
        try:
            for episode in reader.export():
                stream.write(json.dumps(episode, ensure_ascii=False) + "\n")
                count += 1
        finally:
            if out:
                stream.close()
        if out:
            typer.echo(f"exported {count} episodes to {out}", err=True)
