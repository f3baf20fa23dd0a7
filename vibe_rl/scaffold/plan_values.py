"""Plans are data, never code: every value of a TaskSpec is checked by type and pattern before a template sees it.

A plan comes from a file the user edits (`vibe-rl new --plan`), from an LLM planner's answer or from a project's
`task_spec.json` (`vibe-rl run`). Its values end up in generated Python, YAML, launcher scripts and tmux session
names, so nothing may be taken on trust:

- names (servers, teams, roles, modes, static models): `[A-Za-z0-9_][A-Za-z0-9_.-]*`, no `..`, at most 64 chars;
- env var names (`url_env`, `api_key_env`, `base_url_env`, `judge_env_prefix`): `[A-Za-z_][A-Za-z0-9_]*`;
- URLs: `http(s)://` with no blanks, quotes or control characters;
- files of the project (`servers[].config`, `modes[].script`, `modes[].run_file`): relative, inside the project,
  made of `[A-Za-z0-9_./-]`, no `..`; a config ends in .yaml/.yml, a script in .py;
- game parameters: the type of the manifest's default (an int stays an int, a bool a bool);
- free text (title, description, model paths): no control characters.

Templates still emit every value through a serializer (`| py`, `| tojson`), and the renderer refuses any string that
reaches a Python file without one (render.py); this check says which field is wrong and how to fix it.
"""

from __future__ import annotations

import math
import re
from pathlib import Path, PurePosixPath
from typing import Any

from vibe_rl.errors import ConfigError, TemplateError

NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
URL = re.compile(r"https?://[^\s\"'`\\<>{}|^]{1,2000}")
PROJECT_FILE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./-]{0,199}")
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
ENV_PARAMETERS = {"judge_env_prefix"}  # game parameters that name env vars
MAX_TEXT = 200_000


class PlanValueError(TemplateError, ConfigError):
    """A plan value does not have the type or shape its field requires (it would reach generated code)."""


def _fail(field: str, value: Any, rule: str) -> PlanValueError:
    shown = repr(value)[:80]
    return PlanValueError(f"plan field {field} = {shown} is refused: {rule}. Fix {field} in the TaskSpec "
                          "(task_spec.json or the --plan file) and run the command again.")


def check_name(field: str, value: Any) -> None:
    if not isinstance(value, str) or not NAME.fullmatch(value) or ".." in value:
        raise _fail(field, value, "a name is 1-64 characters of letters, digits, '_', '.', '-' (not starting "
                                  "with '.' or '-', no '..')")


def check_env(field: str, value: Any, optional: bool = False) -> None:
    if optional and value is None:
        return
    if not isinstance(value, str) or not ENV_NAME.fullmatch(value):
        raise _fail(field, value, "an environment variable name is letters, digits and '_', not starting with a "
                                  "digit, e.g. OPENAI_API_KEY")


def check_url(field: str, value: Any, optional: bool = False) -> None:
    if optional and value is None:
        return
    if not isinstance(value, str) or not URL.fullmatch(value):
        raise _fail(field, value, "a URL starts with http:// or https:// and holds no blanks, quotes, backslashes "
                                  "or control characters")


def check_text(field: str, value: Any, optional: bool = False, newlines: bool = True) -> None:
    if optional and value is None:
        return
    if not isinstance(value, str):
        raise _fail(field, value, "it must be a string")
    bad = CONTROL.search(value) or (not newlines and re.search(r"[\n\r\t]", value))
    if bad:
        raise _fail(field, value, f"it holds the control character {bad.group()!r}; remove it")
    if len(value) > MAX_TEXT:
        raise _fail(field, value, f"it is {len(value)} characters long; keep it under {MAX_TEXT}")


def check_project_file(field: str, value: Any, suffixes: tuple[str, ...], root: Path | None = None) -> None:
    """A file of the project: relative, made of safe characters, no '..', with one of `suffixes`; with `root`,
    also inside `root` once symlinks are resolved."""
    rule = (f"a project file is a relative path inside the project ({', '.join(suffixes)}) of letters, digits, "
            "'_', '.', '-', '/', with no '..'")
    if not isinstance(value, str) or not PROJECT_FILE.fullmatch(value) or not value.endswith(suffixes):
        raise _fail(field, value, rule)
    parts = PurePosixPath(value).parts
    if any(p in ("..", ".") for p in parts) or value.startswith("/"):
        raise _fail(field, value, rule)
    if root is not None:
        base = Path(root).resolve()
        if not (base / value).resolve().is_relative_to(base):
            raise _fail(field, value, f"{value} leads out of the project {base} (a symlink?)")


def _same_type(field: str, value: Any, default: Any) -> None:
    """A game parameter keeps the type of its manifest default (containers: element by element)."""
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    elif isinstance(default, str):
        ok = isinstance(value, str)
        if ok:
            check_text(field, value)
    elif isinstance(default, dict):
        ok = isinstance(value, dict)
        if ok:
            sample = next(iter(default.values()), None)
            for key, item in value.items():
                check_name(f"{field} key", key)
                if sample is not None:
                    _same_type(f"{field}.{key}", item, sample)
    elif isinstance(default, list):
        ok = isinstance(value, list)
        if ok and default:
            for i, item in enumerate(value):
                _same_type(f"{field}[{i}]", item, default[0])
    else:  # no default (null): unset, or a plain number
        ok = value is None or isinstance(value, bool | int) or (isinstance(value, float) and math.isfinite(value))
        if not ok:
            raise _fail(field, value, "it must be null or a finite number")
    if not ok:
        raise _fail(field, value, f"it must be a {type(default).__name__} like its default {default!r}")


def check_plan(spec, manifest=None, root: Path | None = None) -> None:
    """Refuse a plan with any value that is not of its field's type and shape (PlanValueError names the field).
    `manifest`: the family's (game parameters are typed by its defaults);
    `root`: the project folder (files must stay inside it once symlinks are resolved)."""
    from vibe_rl.scaffold.families import check_family_name

    check_family_name(spec.family)
    for field in ("title", "description"):
        check_text(field, getattr(spec, field))
    for i, note in enumerate(spec.notes):
        check_text(f"notes[{i}]", note)
    for i, clause in enumerate(spec.unparsed):
        check_text(f"unparsed[{i}]", clause)
    for i, m in enumerate(spec.static_models):
        check_name(f"static_models[{i}].name", m.name)
        check_url(f"static_models[{i}].base_url", m.base_url, optional=True)
        check_env(f"static_models[{i}].base_url_env", m.base_url_env, optional=True)
        check_env(f"static_models[{i}].api_key_env", m.api_key_env, optional=True)
        check_text(f"static_models[{i}].upstream_model", m.upstream_model, optional=True, newlines=False)
        check_text(f"static_models[{i}].local_path", m.local_path, optional=True, newlines=False)
    for i, team in enumerate(spec.teams):
        check_name(f"teams[{i}].name", team.name)
        check_name(f"teams[{i}].model", team.model)
        for j, role in enumerate(team.roles):
            check_name(f"teams[{i}].roles[{j}]", role)
    for i, s in enumerate(spec.servers):
        check_name(f"servers[{i}].name", s.name)
        check_env(f"servers[{i}].url_env", s.url_env)
        check_project_file(f"servers[{i}].config", s.config, (".yaml", ".yml"), root)
        check_text(f"servers[{i}].model_path", s.model_path, newlines=False)
        for j, name in enumerate(s.static_models):
            check_name(f"servers[{i}].static_models[{j}]", name)
    for i, mode in enumerate(spec.modes):
        check_name(f"modes[{i}].name", mode.name)
        for field in ("script", "run_file"):
            value = getattr(mode, field)
            check_project_file(f"modes[{i}].{field}", value, (".py",), root)
        for key in [*mode.teams, *mode.teams.values(), *mode.rewarded, *mode.rewarded.values(), *mode.gpus]:
            check_name(f"modes[{i}] wiring", key)
    for field in ("win", "loss"):
        value = getattr(spec.reward, field)
        if not math.isfinite(value):
            raise _fail(f"reward.{field}", value, "a reward is a finite number")
    check_text("reward.description", spec.reward.description)
    for field in ("lr", "temperature"):
        if not math.isfinite(getattr(spec.training, field)):
            raise _fail(f"training.{field}", getattr(spec.training, field), "it must be a finite number")
    if manifest is not None:
        for key, value in spec.game.items():
            if key in manifest.parameters:
                _same_type(f"game.{key}", value, manifest.parameters[key].default)
                if key in ENV_PARAMETERS:
                    check_env(f"game.{key}", value)
