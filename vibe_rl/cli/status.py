"""`vibe-rl status DIR [--wait S]`: where a `vibe-rl run` of the project stands, in bounded time."""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer

EXIT_RUNNING = 3


def register(app: typer.Typer) -> None:
    @app.command("status")
    def status(
        project: Path = typer.Argument(..., help="Project folder a `vibe-rl run` was started on."),
        wait: float = typer.Option(0.0, "--wait", min=0, help="Wait up to S seconds for the run to end; print the "
                                                       "progress now and then. 0: answer at once."),
    ) -> None:
        """Progress and outcome of the project's latest `vibe-rl run` (e.g. one started with --detach).

        Exit status: 0 success, 1 failed or stopped (or the run process died), 3 still running."""
        from vibe_rl.autopilot.state import RunState
        from vibe_rl.errors import ConfigError

        if not project.is_dir():  # a file or a missing folder is named as such, not as 'no run started'
            from vibe_rl.cli.checks import check_project

            check_project(project)
        project = project.resolve()
        state = RunState.load(project)
        if state is None:
            raise ConfigError(f"No `vibe-rl run` has been started in {project} (no logs/run-state.json): start "
                              f"one with `vibe-rl run {project} --detach`")
        deadline, said = time.monotonic() + max(0.0, wait), 0.0
        while state.active() and time.monotonic() < deadline:
            if time.monotonic() - said >= 15:
                said = time.monotonic()
                typer.echo(state.progress())
            time.sleep(1.0)
            state = RunState.load(project) or state
        if state.outcome == "running" and not state.active():
            state.outcome, state.phase = "failed", "died"
            typer.echo(f"[vibe-rl] the run process (pid {state.pid}) ended without an outcome (killed?); "
                       f"its output: {state.log or 'the terminal that started it'}")
        typer.echo(state.progress())
        for name, prog in state.servers.items():
            typer.echo(f"  {name}: {prog.url} (tmux session {prog.session})")
        if state.sessions:
            typer.echo("  tmux sessions: " + ", ".join(state.sessions))
        if state.last_line:
            typer.echo(f"  last output: {state.last_line}")
        report = project / "logs" / "autopilot-report.json"
        if state.outcome != "running" and report.is_file() and report.stat().st_mtime >= state.started:
            from vibe_rl.autopilot.report import RunReport

            data = json.loads(report.read_text())
            typer.echo(RunReport.from_dict(data).render())
        elif state.outcome == "running":
            typer.echo(f"  still running: `vibe-rl status {project} --wait 60` again"
                       + (f"; output in {state.log}" if state.log else ""))
        for line in _live(state):
            typer.echo(line)
        raise typer.Exit({"success": 0, "running": EXIT_RUNNING}.get(state.outcome, 1))


def _live(state) -> list[str]:
    """What the project's servers say now (they keep training after a run without --stop)."""
    import httpx

    from vibe_rl.swarm.auth import client_token

    lines = []
    with httpx.Client(timeout=2.0, trust_env=False) as http:
        for name, prog in state.servers.items():
            try:
                token = client_token(prog.url)  # the admin token the server registered for its port
                st = http.get(f"{prog.url}/control/status",
                              headers={"Authorization": f"Bearer {token}"} if token else {}).json()
            except (httpx.HTTPError, ValueError):
                continue
            pool = st.get("pool") or {}
            lines.append(f"  {name} at {prog.url} now: {st.get('state')}, global step {st.get('global_step')}, "
                         f"{pool.get('completed_episodes', 0)} episodes pooled (tmux session {prog.session})")
            if st.get("trace_viewer"):
                lines.append(f"    traces: `vibe-rl swarm ui --url {prog.url}` prints a login link to "
                             f"{prog.url}{st['trace_viewer']} (one timeline per game)")
    return lines
