"""`vibe-rl traces serve|export EXPERIMENT_DIR`: read the recorded games of a run."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import typer


def open_traces(experiment_dir: Path):
    """A TraceReader of the folder, after checking its swarm.sqlite is a database with recorded episodes."""
    import sqlite3

    from vibe_rl.errors import ConfigError
    from vibe_rl.swarm.observe.traces import DB_NAME, TraceReader

    reader = TraceReader(experiment_dir)  # fails, with the fix, when there is no swarm.sqlite
    try:
        with reader._db() as db:
            db.execute("SELECT episode_uuid, task_id, reward FROM episodes LIMIT 1").fetchall()
            db.execute("SELECT episode_uuid FROM turns LIMIT 1").fetchall()
    except sqlite3.Error as exc:
        raise ConfigError(f"{experiment_dir / DB_NAME} is not a swarm server's episode database ({exc}). Pass the "
                          "experiment dir of a run (e.g. PROJECT/experiments/server1); a damaged file can be moved "
                          "aside, the server writes a new one.") from None
    return reader


def register(app: typer.Typer) -> None:
    traces = typer.Typer(help="Read a run's recorded episodes: a web viewer, or an export.", no_args_is_help=True)
    app.add_typer(traces, name="traces")

    @traces.command("serve")
    def serve(
        experiment_dir: Path = typer.Argument(..., help="An experiment dir holding swarm.sqlite "
                                                         "(e.g. PROJECT/experiments/server1)."),
        port: int = typer.Option(8765, "--port", min=0, max=65535, help="TCP port (0: any free port)."),
        host: str = typer.Option("127.0.0.1", "--host", help="Bind address (loopback by default)."),
        allowed_host: list[str] = typer.Option([], "--allowed-host", help=(
            "Extra Host/Origin name accepted besides the bind address and loopback (repeatable).")),
    ) -> None:
        """Serve the trace viewer: episodes -> each player's conversation, models, rewards, weight versions.

        The pages open only in a browser that opened the one-time login link printed at the start."""
        from vibe_rl.cli.checks import check_port
        from vibe_rl.swarm.observe.ui import serve as serve_ui

        open_traces(experiment_dir)  # fails early, with the fix, when there is no usable swarm.sqlite
        check_port(host, port)
        serve_ui(str(experiment_dir), host, port, allowed_hosts=list(allowed_host))

    @traces.command("export")
    def export(
        experiment_dir: Path = typer.Argument(..., help="An experiment dir holding swarm.sqlite."),
        fmt: str = typer.Option("jsonl", "--format", help="Output format: jsonl (one episode with its turns a line)."),
        out: Path = typer.Option(None, "--out", help="File to write (default: stdout)."),
    ) -> None:
        """Export every episode with its task, reward, metadata and turns (messages, answer, model, version)."""
        from vibe_rl.errors import ConfigError

        if fmt != "jsonl":
            raise ConfigError(f"--format {fmt!r} is not supported: use --format jsonl.")
        if out is not None and out.is_dir():
            raise ConfigError(f"--out {out} is a folder; pass a file, e.g. --out {out / 'episodes.jsonl'}.")
        if out is not None and not out.parent.is_dir():
            raise ConfigError(f"--out {out}: the folder {out.parent} does not exist. Create it or pick another path.")
        reader = open_traces(experiment_dir)
        # a file is written next to --out and renamed at the end: an error or Ctrl-C leaves no half an export
        tmp = out.with_name(f".{out.name}.partial-{os.getpid()}") if out else None
        stream = tmp.open("w", encoding="utf-8") if tmp else sys.stdout
        count = 0
        try:
            for episode in reader.export():
                stream.write(json.dumps(episode, ensure_ascii=False) + "\n")
                count += 1
            if tmp:
                stream.close()
                os.replace(tmp, out)
        finally:
            if tmp:
                stream.close()
                tmp.unlink(missing_ok=True)
        if out:
            typer.echo(f"exported {count} episodes to {out}", err=True)
