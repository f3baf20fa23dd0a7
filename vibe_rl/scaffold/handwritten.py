"""Doctor checks for a hand-written project (`vibe-rl init`, or files written by an agent): task_spec.json
against its schema, and a family with no template named as such, with what a template would add."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from vibe_rl.errors import VibeRLError
from vibe_rl.schema.spec import SPEC_FILE, TaskSpec

CUSTOM = "custom"  # the family of a project written by hand (`vibe-rl init`)
TEMPLATE_ADDS = ("re-rendering with `vibe-rl new`, the family's task-id check of its dataset, and its "
                 "planner rules")


def check_files(doctor, suffixes: tuple[str, ...]) -> bool:
    """Files that are not UTF-8 (one error each; every other check skips them) and a missing task_spec.json
    (an error: `vibe-rl run` needs it). True when task_spec.json is there to be loaded."""
    for path in doctor.files(suffixes):
        try:
            path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError) as exc:
            doctor.unreadable.add(doctor.rel(path))
            why = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else f"unreadable ({exc.strerror})"
            doctor.add("error", doctor.rel(path), 0, f"{why}; the other checks skip it",
                       "save it as UTF-8 (e.g. iconv -f GBK -t UTF-8 FILE > NEW, then move NEW over FILE)")
    if not (doctor.root / SPEC_FILE).is_file():
        doctor.add("error", SPEC_FILE, 0, "missing: this folder is not a vibe-rl project (`vibe-rl run` needs it); "
                   "wiring and size checks are skipped", "pass the project folder, re-render it with `vibe-rl new`, "
                   "or write task_spec.json (`vibe-rl schema taskspec` lists its fields)")
        return False
    return SPEC_FILE not in doctor.unreadable


def check_spec_file(doctor, root: Path) -> None:
    """A task_spec.json that is not valid JSON or breaks the schema is an error naming the field."""
    path = Path(root) / SPEC_FILE
    if not path.is_file():
        return
    try:
        TaskSpec.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except json.JSONDecodeError as exc:
        doctor.add("error", SPEC_FILE, exc.lineno, f"not valid JSON: {exc.msg}", "fix the JSON syntax")
    except ValidationError as exc:
        for err in exc.errors()[:5]:
            where = ".".join(str(p) for p in err["loc"]) or "(top level)"
            doctor.add("error", SPEC_FILE, 0, f"{where}: {err['msg']}",
                       "`vibe-rl schema taskspec` prints every field and its meaning; `vibe-rl init DIR` writes a "
                       "valid example")


def check_family(doctor, spec: TaskSpec | None) -> None:
    """An unknown family is fine for `vibe-rl run`; say what a template would have added."""
    if spec is None:
        return
    try:
        from vibe_rl.scaffold.families import list_families

        known = {m.name for m in list_families()}
    except VibeRLError:
        return
    if spec.family != CUSTOM and spec.family not in known:
        doctor.add("warning", SPEC_FILE, 0,
                   f"family {spec.family!r} has no template (templates: {', '.join(sorted(known))}): a hand-written "
                   f"project runs as is, without {TEMPLATE_ADDS}",
                   f"a typo? Else write family {CUSTOM!r} (a hand-written project, as `vibe-rl init` makes), keep "
                   "task ids unique and non-empty (e.g. <seed>-<seat>) and test your rules yourself")
