"""`vibe-rl run DIR`: drive the project's tmux sessions until training has really started."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    @app.command("run")
    def run(
        project: Path = typer.Argument(..., help="Project folder made by `vibe-rl new` (holds task_spec.json)."),
        mode: str = typer.Option(None, "--mode", help="Run mode, e.g. agent_roll or agent_roll_adv (default: the first)."),
        until: str = typer.Option(None, "--until", help="'first-step' (default) or 'steps:N': the global step to reach."),
        timeout: float = typer.Option(1800.0, "--timeout", help="Seconds to wait for the target step."),
        fix: str = typer.Option("auto", "--fix", help="'auto': ask the configured LLM for fixes; 'off': only diagnose."),
        stop: bool = typer.Option(False, "--stop", help="End this project's tmux sessions: after the run, or right "
                                                        "away when no --until is given. Other sessions are untouched."),
        max_fixes: int = typer.Option(5, "--max-fixes", help="Most fix attempts (LLM answers) per run."),
        device: str = typer.Option("auto", "--device", help="'auto', 'cpu' (tiny model, small settings) or 'gpu'."),
        overrides: list[str] = typer.Option(None, "--set", help="Server job override key.sub=value (repeatable)."),
        ready_timeout: float = typer.Option(300.0, "--ready-timeout", help="Seconds for the servers to answer /healthz."),
    ) -> None:
        """Start servers and client in tmux (uv venvs), watch, diagnose, fix, until the target step."""
        from vibe_rl.autopilot.llm import llm_from_env
        from vibe_rl.autopilot.plan import RunOptions, stop_sessions
        from vibe_rl.autopilot.runner import Runner
        from vibe_rl.errors import ConfigError

        if fix not in ("auto", "off"):
            raise ConfigError(f"--fix {fix!r}: use 'auto' or 'off'")
        if device not in ("auto", "cpu", "gpu"):
            raise ConfigError(f"--device {device!r}: use 'auto', 'cpu' or 'gpu'")
        if stop and until is None:
            stopped = stop_sessions(project)
            typer.echo("[vibe-rl] stopped: " + (", ".join(stopped) if stopped else "no session of this project was running"))
            return
        opts = RunOptions(project_dir=project, mode=mode, until=until or "first-step", timeout=timeout, fix=fix,
                          stop_after=stop, max_fixes=max_fixes, device=device, overrides=list(overrides or []),
                          ready_timeout=ready_timeout)
        llm = llm_from_env() if fix == "auto" else None
        if llm is None:
            typer.echo("[vibe-rl] no fix LLM configured: failures are diagnosed, not fixed "
                       "(set VIBE_RL_FIX_MODEL with OPENAI_API_KEY/OPENAI_BASE_URL or ANTHROPIC_API_KEY)")
        report = Runner(opts, llm=llm, out=lambda line: typer.echo(line)).run()
        typer.echo(report.render())
        raise typer.Exit(0 if report.outcome == "success" else 1)
