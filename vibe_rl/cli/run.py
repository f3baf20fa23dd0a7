"""`vibe-rl run DIR`: drive the project's tmux sessions until training has really started."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import typer

UNTIL_HELP = ("What to wait for, counted in weight updates made by THIS run (a resumed checkpoint's steps do not "
              "count): 'first-step' (default), 'steps:N', or 'first-signal' (the first update with a non-zero "
              "gradient, i.e. some GRPO group had unequal rewards).")


def register(app: typer.Typer) -> None:
    @app.command("run")
    def run(
        project: Path = typer.Argument(..., help="Project folder (holds task_spec.json): made by `vibe-rl new`, "
                                                 "`vibe-rl init` or by hand."),
        mode: str = typer.Option(None, "--mode", help="Run mode, e.g. agent_roll or agent_roll_adv (default: the first)."),
        until: str = typer.Option(None, "--until", help=UNTIL_HELP),
        timeout: float = typer.Option(None, "--timeout", min=1, help="Seconds to wait for --until. "
                                      "Agents: prefer --detach and `vibe-rl status DIR --wait S`."),
        fix: str = typer.Option("auto", "--fix", help="'auto': ask the configured LLM for fixes; 'off': only diagnose."),
        stop: bool = typer.Option(False, "--stop", help="End this project's tmux sessions: after the run, or right "
                                                        "away when no --until is given. Other sessions are untouched."),
        fresh: bool = typer.Option(False, "--fresh", help="Start over at step 0: earlier checkpoints and episodes "
                                                          "are moved to experiments/.previous/ (nothing is deleted). "
                                                          "Default: resume the checkpoint and say so."),
        detach: bool = typer.Option(False, "--detach", help="Return at once; the run goes on in the background "
                                                            "(output in DIR/logs/run.log). Follow it with "
                                                            "`vibe-rl status DIR --wait S`."),
        max_fixes: int = typer.Option(5, "--max-fixes", min=0, help="Most fix attempts (LLM answers) per run."),
        device: str = typer.Option("auto", "--device", help="'auto', 'cpu' (tiny model, small settings) or 'gpu'."),
        model: str = typer.Option(None, "--model", help="Model every server serves instead of the spec's: 'tiny' "
                                                        "(the default on CPU), 'smollm2' (SmolLM2-135M-Instruct, a "
                                                        "real pretrained model that can learn on CPU; `vibe-rl model "
                                                        "smollm2` builds it) or a local HF directory."),
        overrides: list[str] = typer.Option(None, "--set", help="Server job override key.sub=value (repeatable); "
                                                                "it wins over the CPU caps."),
        ready_timeout: float = typer.Option(300.0, "--ready-timeout", min=1, help="Seconds for the servers to answer /healthz."),
    ) -> None:
        """Start servers and client in tmux (uv venvs), watch, diagnose, fix, until --until is met.

        Session names and ports belong to the project (a hash of its folder), so projects never collide; a
        port someone else holds moves to the next free one, with a note. The live state is in
        DIR/logs/run-state.json and the report in DIR/logs/autopilot-report.json. Exit status: 0 when --until
        was met, 130 when stopped by Ctrl-C or SIGTERM, 1 otherwise (failed, timed out)."""
        from vibe_rl.autopilot.llm import llm_from_env
        from vibe_rl.autopilot.plan import RunOptions, parse_until, stop_sessions
        from vibe_rl.autopilot.runner import Runner
        from vibe_rl.cli.checks import check_overrides, check_project
        from vibe_rl.errors import ConfigError

        check_project(project)
        if fix not in ("auto", "off"):
            raise ConfigError(f"--fix {fix!r}: use 'auto' or 'off'")
        if device not in ("auto", "cpu", "gpu"):
            raise ConfigError(f"--device {device!r}: use 'auto', 'cpu' or 'gpu'")
        if stop and until is None and not detach:
            unused = [opt for opt, on in (("--fresh", fresh), ("--set", bool(overrides)), ("--model", model is not None),
                                          ("--timeout", timeout is not None), ("--mode", mode is not None)) if on]
            if unused:  # `--stop` alone only ends the sessions: these would be dropped silently
                raise ConfigError(f"{' and '.join(unused)} with --stop alone does nothing (--stop without --until "
                                  "only ends the sessions). Add --until first-step to run first, or drop "
                                  f"{' and '.join(unused)}.")
            stopped = stop_sessions(project)
            typer.echo("[vibe-rl] stopped: " + (", ".join(stopped) if stopped else "no session of this project was running"))
            return
        parse_until(until or "first-step")  # a bad --until fails here, not in the background
        check_overrides(list(overrides or []))
        if detach:
            _detach(project, [a for a in sys.argv[1:] if a != "--detach"])
            return
        opts = RunOptions(project_dir=project, mode=mode, until=until or "first-step", timeout=timeout or 1800.0, fix=fix,
                          stop_after=stop, max_fixes=max_fixes, device=device, overrides=list(overrides or []),
                          ready_timeout=ready_timeout, fresh=fresh, model=model)
        llm = llm_from_env() if fix == "auto" else None
        runner = Runner(opts, llm=llm, out=lambda line: typer.echo(line))  # a bad task_spec.json or --mode fails here
        if llm is None and fix == "auto":
            typer.echo("[vibe-rl] no fix LLM configured: failures are diagnosed, not fixed "
                       "(set VIBE_RL_FIX_MODEL with OPENAI_API_KEY/OPENAI_BASE_URL or ANTHROPIC_API_KEY)")
        report = runner.run()
        typer.echo(report.render())
        from vibe_rl.swarm.observe.curves import write_run_curves

        for line in write_run_curves(project):  # reward and loss per step, next to the report (logs/)
            typer.echo(line)
        raise typer.Exit({"success": 0, "stopped": 130}.get(report.outcome, 1))


def _detach(project: Path, argv: list[str]) -> None:
    """Start the same `vibe-rl run` in its own session (it outlives this shell), then return."""
    from vibe_rl.autopilot.runner import RunBusyError
    from vibe_rl.autopilot.state import RUN_LOG, RunState

    project = project.resolve()
    before = RunState.load(project)
    if before is not None and before.active():
        raise RunBusyError(f"a `vibe-rl run` (pid {before.pid}) is already driving {project}: "
                           f"`vibe-rl status {project} --wait 60` follows it")
    log = project / RUN_LOG
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-c", "from vibe_rl.cli import main; main()", *argv]
    with log.open("w") as fh:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True, env={**os.environ, "VIBE_RL_RUN_LOG": str(log)})
    mine = RunState.load(project)
    if mine is None or mine.pid != proc.pid:  # the run itself may have written its state already
        until = next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--until"), "first-step")
        RunState(str(project), proc.pid, until=until, phase="starting", log=str(log)).save(project)
    typer.echo(f"[vibe-rl] run started in the background (pid {proc.pid}); output: {log}")
    typer.echo(f"[vibe-rl] follow it: vibe-rl status {project} --wait 60   (repeat while it exits 3: still running)")
