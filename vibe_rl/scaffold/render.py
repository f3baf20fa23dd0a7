"""Render a TaskSpec into a project folder: jinja2 (StrictUndefined) files, task_spec.json, one TrainJob
YAML per swarm server, then the family's data-generation scripts."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from vibe_rl.errors import TemplateError
from vibe_rl.scaffold.families import Manifest, load_family
from vibe_rl.schema.spec import SPEC_FILE, TaskSpec

SKIP = {"__pycache__", ".pytest_cache", ".ruff_cache"}
# What a plan value may look like when a Python template pastes it without a serializer: a name, a number, a
# relative path, words. Anything else (quotes, backslashes, newlines, brackets) must go through `| py` or `| doc`.
RAW_IN_PYTHON = re.compile(r"[A-Za-z0-9_.,/ -]*")


class UnsafeTemplateValueError(TemplateError):
    """A Python template pasted a string that could end a literal (it must use `| py` or `| doc`)."""


def py_literal(value: Any) -> Markup:
    """A Python literal of a plain value (str, int, float, bool, None, and lists/dicts of them); strings as JSON
    strings, which Python reads the same way. Jinja filter `py`."""
    def lit(v: Any) -> str:
        if v is None or isinstance(v, bool | int):
            return repr(v)
        if isinstance(v, float):
            if not math.isfinite(v):
                raise UnsafeTemplateValueError(f"{v!r} is not a finite number; fix it in the plan")
            return repr(v)
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list | tuple):
            return "[" + ", ".join(lit(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{lit(k)}: {lit(x)}" for k, x in v.items()) + "}"
        raise UnsafeTemplateValueError(f"a {type(v).__name__} has no Python literal; the plan must give plain values")
    return Markup(lit(value))


def doc_text(value: Any) -> Markup:
    """Text inside a triple-quoted docstring: backslashes and quotes escaped, so it cannot end the string.
    Jinja filter `doc`."""
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return Markup(text)


def _guard_python(value: Any) -> Any:
    """finalize of Python templates: a value pasted without `| py` / `| doc` must be a number or plain words."""
    if isinstance(value, Markup) or value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    if isinstance(value, str) and RAW_IN_PYTHON.fullmatch(value):
        return value
    raise UnsafeTemplateValueError(f"the value {str(value)[:80]!r} would be pasted into Python code as it is; a plan "
                                   "value reaches generated code only through a serializer. Fix the plan value (names "
                                   "are letters, digits, '_', '.', '-'), or the template (`| py` for a literal).")


def build_context(spec: TaskSpec, manifest: Manifest) -> dict[str, Any]:
    """What templates see. Lookups are precomputed so templates stay free of logic.

    A mode the manifest declares but the plan left out gets the teams' default wiring on the first server,
    so shared files (e.g. an agent_run.py that agent_run_adv.py imports) still render; its script is skipped."""
    teams = {t.name: t for t in spec.teams}
    planned = {m.name for m in spec.modes}
    mode_servers = {m.name: m.servers for m in spec.modes}
    wiring = {m.name: {r: spec.model_for_role(r, m.name).name for r in spec.roles} for m in spec.modes}
    rewarded = {m.name: {s: teams[t].roles[0] for s, t in m.rewarded.items()} for m in spec.modes}
    for info in manifest.modes:
        if info.name not in planned:
            first = spec.servers[0].name
            mode_servers[info.name] = [first]
            wiring[info.name] = {r: spec.team_of(r).model for r in spec.roles}
            rewarded[info.name] = {first: next((t.roles[0] for t in spec.teams if t.model == first),
                                               spec.teams[0].roles[0])}
    return {
        "spec": spec,
        "manifest": manifest,
        "game": manifest.resolve_parameters(spec.game),
        "training": spec.training,
        "reward": spec.reward,
        "servers": {s.name: s for s in spec.servers},
        "mode_servers": mode_servers,
        "wiring": wiring,
        "rewarded_role": rewarded,
        "main_role": {m: r[mode_servers[m][0]] for m, r in rewarded.items() if mode_servers[m][0] in r},
        # the autopilot names sessions after the project's folder too (autopilot/identity.py): <hash> here
        "tmux_sessions": [f"{spec.short_name}-<hash>-swarm-server" + (f"-{i + 1}" if i else "")
                          for i, _ in enumerate(spec.servers)] + [f"{spec.short_name}-<hash>-swarm-client"],
    }


def skipped_files(spec: TaskSpec, manifest: Manifest) -> set[str]:
    """Files of the modes the manifest declares but the plan does not have: each such mode's script, and its
    run file unless another kept file of the family imports it (agent_run_adv.py imports agent_run.py)."""
    planned = {m.name for m in spec.modes}
    unplanned = [info for info in manifest.modes if info.name not in planned]
    skipped = {info.script for info in unplanned}
    kept_runs = {m.run_file for m in spec.modes}
    sources = {p.name.removesuffix(".j2"): p.read_text(encoding="utf-8") for p in manifest.project_dir.glob("*.py*")}
    for info in unplanned:
        stem = info.run_file.removesuffix(".py")
        users = [name for name, text in sources.items() if name != info.run_file and name not in skipped
                 and re.search(rf"^\s*(?:from {stem} import|import {stem}\b)", text, re.MULTILINE)]
        if info.run_file not in kept_runs and not users:
            skipped.add(info.run_file)
    return skipped


def config_text(spec: TaskSpec, server: str) -> str:
    """The server's TrainJob YAML: the planned settings only, each commented (`job_yaml`)."""
    from vibe_rl.scaffold.job_yaml import job_yaml

    s = spec.server(server)
    modes = [m.name for m in spec.modes if server in m.servers]
    title = f"TrainJob of swarm server '{s.name}' (port {s.port}, {s.gpus} GPUs; modes: {', '.join(modes)})."
    return job_yaml(spec.train_job(server), title)


def render_files(spec: TaskSpec, manifest: Manifest) -> dict[str, str]:
    """Relative path -> text of every file the family renders (before data generation)."""
    from vibe_rl.scaffold.plan_values import check_plan

    context = build_context(spec, manifest)  # unknown or out-of-range game parameters are refused here
    check_plan(spec, manifest)  # then every value by type and pattern, before any template sees one
    envs = {}
    for python in (False, True):
        envs[python] = jinja2.Environment(loader=jinja2.FileSystemLoader(str(manifest.project_dir)),
                                          undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                                          finalize=_guard_python if python else None)
        envs[python].filters.update(py=py_literal, doc=doc_text)
    skipped = skipped_files(spec, manifest)
    files: dict[str, str] = {}
    for path in sorted(manifest.project_dir.rglob("*")):
        if path.is_dir() or SKIP & set(path.parts):
            continue
        rel = path.relative_to(manifest.project_dir).as_posix()
        if rel.removesuffix(".j2") in skipped:
            continue
        if rel.endswith(".j2"):
            try:
                files[rel[:-3]] = envs[rel.endswith(".py.j2")].get_template(rel).render(context)
            except jinja2.TemplateError as exc:
                where = f"{manifest.project_dir / rel}" + (f":{exc.lineno}" if getattr(exc, "lineno", None) else "")
                raise TemplateError(f"Cannot render {where} for this spec: {exc}. The spec lacks something the "
                                    f"template needs; compare it with `vibe-rl new --dry-run --json` output.") from exc
        else:
            files[rel] = path.read_text(encoding="utf-8")
    files[SPEC_FILE] = spec.model_dump_json(indent=2) + "\n"
    for server in spec.servers:
        files[server.config] = config_text(spec, server.name)
    return files


def render_project(spec: TaskSpec, out_dir: str | Path, force: bool = False, python: str = sys.executable) -> list[Path]:
    """Write the project; refuse a file, a non-empty folder (unless `force`) or a folder inside another project
    (unless `force`). Everything is written next to `out_dir` first and moved into place at the end, so a failed
    render (a template or data script error, a full disk, Ctrl-C) leaves no half-written project. Returns the
    written files."""
    from vibe_rl.scaffold.outdir import check_target, staged_folder

    manifest = load_family(spec.family)
    out = Path(out_dir)
    check_target(out, "--out", force)
    files = render_files(spec, manifest)
    with staged_folder(out, "--out") as staged:
        for rel, text in files.items():
            path = staged / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        for script in manifest.dataset.generate if manifest.dataset else []:
            try:
                done = subprocess.run([python, script], cwd=staged, capture_output=True, text=True, timeout=120)
            except subprocess.TimeoutExpired:
                raise TemplateError(f"{spec.family}'s {script} ran past 120 s while generating data; nothing was "
                                    f"written to {out}. Fix the template or lower the spec's sizes.") from None
            if done.returncode != 0:
                raise TemplateError(f"{spec.family}'s {script} failed while generating data (exit "
                                    f"{done.returncode}); nothing was written to {out}:\n{done.stderr[-2000:]}\n"
                                    "Fix the template or the spec's parameters.")
    written = [out / rel for rel in files]
    if manifest.dataset:
        written.append(out / manifest.dataset.file)
    return written
