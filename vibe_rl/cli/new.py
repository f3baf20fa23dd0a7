"""`vibe-rl new`: a natural-language spec (or an edited TaskSpec) -> a rendered project."""

from __future__ import annotations

from pathlib import Path

import typer


def _show(task, planner: str, as_json: bool) -> None:
    """The plan summary, notes, and in yellow what the planner did not understand (stderr with --json)."""
    if as_json:
        typer.echo(task.model_dump_json(indent=2))
    else:
        typer.echo(f"planner: {planner}; family: {task.family}; project: {task.name}")
        for note in task.notes:
            typer.echo(f"note: {note}")
    for clause in task.unparsed:
        typer.secho(f"not understood: {clause!r}", fg=typer.colors.YELLOW, err=as_json)
    if task.unparsed:
        typer.secho("  (these facts are not in the plan: fix task_spec.json and render it with "
                    "`vibe-rl new --plan FILE`, or rephrase the spec)", fg=typer.colors.YELLOW, err=as_json)


def register(app: typer.Typer) -> None:
    @app.command()
    def new(
        spec: str | None = typer.Argument(None, help="The task in a few lines (Chinese or English)."),
        spec_file: Path | None = typer.Option(None, "--spec-file", "-f", help="Read the spec from this file."),
        plan_file: Path | None = typer.Option(
            None, "--plan", help="Render this TaskSpec JSON (e.g. an edited task_spec.json or the output of "
            "--dry-run --json) instead of planning a spec; validated like a planner's answer."),
        out: Path | None = typer.Option(None, "--out", "-o", help="Project folder (default: generated/<slug>)."),
        name: str | None = typer.Option(None, "--name", help="Project slug, e.g. my_spy_game."),
        family: str | None = typer.Option(
            None, "--family", help="Use this template family instead of matching keywords, e.g. turn_based "
            "(the generic skeleton for a game no template covers)."),
        planner: str = typer.Option(
            "auto", "--planner", help="auto | offline | openai | anthropic. auto: an LLM planner when OPENAI_API_KEY "
            "(else ANTHROPIC_API_KEY) is set, else the offline reader. An LLM's value is used only where it quotes "
            "the spec's words for it (shown in the review table); the offline reader plans instead when the LLM's "
            "API fails, and says so."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Plan only: print the TaskSpec, write nothing."),
        as_json: bool = typer.Option(False, "--json", help="Print the TaskSpec as JSON."),
        force: bool = typer.Option(False, "--force", help="Overwrite files in a non-empty --out folder."),
        yes: bool = typer.Option(False, "--yes", "-y", help="Write without asking to confirm the review table "
                                 "(only a terminal is asked; a script or a pipe never waits)."),
        rules_rounds: int = typer.Option(
            3, "--rules-rounds", min=1, help="With --family turn_based and an LLM planner: rounds the LLM gets to "
            "write game_rules.py and its tests until they, the imports and doctor pass."),
    ) -> None:
        """Turn a spec into a reviewable training project (game rules, agent_run/agent_roll, config, tests).

        What the planner could not place in the plan is printed as "not understood" before anything is
        written; every default it took is printed as a note."""
        from vibe_rl.errors import PlannerError
        from vibe_rl.planner import load_plan, plan_full
        from vibe_rl.planner import review as reviewing
        from vibe_rl.scaffold.render import render_project

        given = [x for x in (spec, spec_file, plan_file) if x is not None]
        if len(given) != 1:
            raise PlannerError('Give exactly one of: the spec as an argument, --spec-file FILE, or --plan '
                               'task_spec.json, e.g. vibe-rl new "who is spy, 8 GPUs, batch size 16".')
        if plan_file is not None:  # options that only steer planning would be dropped silently
            ignored = [opt for opt, given_ in (("--family", family is not None), ("--planner", planner != "auto"),
                                               ("--rules-rounds", rules_rounds != 3)) if given_]
            if ignored:
                raise PlannerError(f"{', '.join(ignored)} cannot be used with --plan: the plan is rendered as it is. "
                                   "Set the family in the TaskSpec file, or plan a spec instead of passing --plan.")
        if out is not None and not dry_run:  # before planning: an LLM planner's answer is not wasted on a bad --out
            from vibe_rl.scaffold.outdir import check_target

            check_target(out, "--out", force)
        if plan_file is not None and plan_file.is_dir():  # a project folder: its task_spec.json
            if not (plan_file / "task_spec.json").is_file():
                raise PlannerError(f"--plan {plan_file} is a folder without task_spec.json. Pass a TaskSpec file (e.g. "
                                   "the output of --dry-run --json) or a project folder that holds task_spec.json.")
            plan_file = plan_file / "task_spec.json"
        if plan_file is not None:
            task, used = load_plan(plan_file, name=name), "none (--plan)"
            spec = reviewing.load_spec(plan_file.parent)  # a project's own review: its sources stay
            rows = reviewing.carry(reviewing.review(task, "", used), reviewing.load(plan_file.parent))
        else:
            if spec_file is not None:
                if spec_file.is_dir():
                    raise PlannerError(f"--spec-file {spec_file} is a folder; pass the spec's file, e.g. "
                                       f"--spec-file {spec_file / 'spec.md'}.")
                if not spec_file.exists():
                    raise PlannerError(f"--spec-file {spec_file} does not exist. Check the path, or pass the spec "
                                       'as an argument: vibe-rl new "who is spy, 8 GPUs".')
                if not spec_file.is_file():
                    raise PlannerError(f"--spec-file {spec_file} is not a regular file (a device or a pipe?). Save "
                                       "the spec to a file and pass that, or pass it as an argument.")
                spec = read_spec(spec_file)
            task, rows, used = plan_full(spec, planner=planner, name=name, family=family)
        _show(task, used, as_json)
        for line in reviewing.table(rows):  # field, value, from: a wrong value is visible at a glance
            typer.echo(line, err=as_json)
        if dry_run:
            from vibe_rl.engine.memory import spec_fit_notes

            for fit in spec_fit_notes(task):  # per-GPU memory of each server: does its model fit?
                typer.echo(fit.message, err=as_json)
            return
        target = out or Path("generated") / task.name
        if not yes and not as_json and _terminal() and not typer.confirm(f"Write the project to {target}?",
                                                                          default=True):
            typer.echo("nothing written: fix the spec (or the plan, --plan FILE) and run `vibe-rl new` again")
            raise typer.Exit(1)
        files = [*render_project(task, target, force=force), reviewing.save(rows, target, used, spec or "")]
        if not as_json:
            typer.echo(f"wrote {len(files)} files to {target}:")
            for path in files:
                typer.echo(f"  {path.relative_to(target)}")
        if task.family == "turn_based" and plan_file is None and not used.startswith("offline"):
            from vibe_rl.scaffold.rules_writer import chat_for, write_rules

            write_rules(target, spec, chat_for(used), max_rounds=rules_rounds,
                        log=lambda line: typer.echo(line, err=as_json))
        elif task.family == "turn_based" and not as_json:
            typer.echo(f"next: write the rules in {target / 'game_rules.py'} (functions marked WRITE) and their "
                       "tests, or rerun with --planner openai|anthropic to have an LLM write them")
        if not as_json:
            import shlex

            typer.echo(f"next: vibe-rl doctor {shlex.quote(str(target))} && vibe-rl run {shlex.quote(str(target))}")


def _terminal() -> bool:
    """A person at a terminal can answer; a script, a pipe or CI never waits for an answer."""
    import sys

    return sys.stdin.isatty() and sys.stdout.isatty()


def read_spec(path: Path) -> str:
    """A spec file as text: UTF-8 (a BOM allowed) or UTF-16 with its BOM (what some Windows editors save)."""
    from vibe_rl.errors import PlannerError

    raw = path.read_bytes()
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return raw.decode("utf-16")
        except UnicodeDecodeError:
            pass
    elif _binary(raw):
        raise PlannerError(f"--spec-file {path} is a binary file, not a text spec. Pass the text file that "
                           "describes the task (UTF-8), e.g. --spec-file spec.md.")
    elif raw.count(b"\x00") > len(raw) // 4:  # NULs decode as UTF-8 too, but no spec holds them
        raise PlannerError(f"--spec-file {path} looks like UTF-16 without a byte-order mark. Save it as UTF-8 (e.g. "
                           f"iconv -f UTF-16LE -t UTF-8 {path} > spec.md) and try again.")
    else:
        try:
            return raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            pass
    raise PlannerError(f"--spec-file {path} is not UTF-8 text. Save it as UTF-8 (e.g. iconv -f GBK -t UTF-8 "
                       f"{path} > spec.md) and try again.")


def _binary(raw: bytes) -> bool:
    """Bytes that are no text in any encoding a spec is saved in: control bytes other than tab/newline, or NULs
    that do not fall at every other position as in UTF-16."""
    head = raw[:4096]
    controls = sum(b < 32 and b not in (9, 10, 12, 13, 0) for b in head)
    nul_even, nul_odd = head[0::2].count(0), head[1::2].count(0)
    utf16_like = max(nul_even, nul_odd) > len(head) // 4 and min(nul_even, nul_odd) <= len(head) // 64
    return controls > len(head) // 100 + 1 or (head.count(0) > 0 and not utf16_like)
