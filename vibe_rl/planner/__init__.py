"""Natural language -> TaskSpec. Planners are chosen by a short name and imported lazily.

- `offline`: keyword and regex rules (vibe_rl.planner.offline), no network.
- `openai` / `anthropic`: the official SDKs with structured output against the TaskSpec JSON schema.
- `auto`: an LLM planner when OPENAI_API_KEY or ANTHROPIC_API_KEY is set, else offline.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Protocol

from vibe_rl.errors import PlannerError
from vibe_rl.schema.spec import TaskSpec

PLANNERS = {
    "offline": "vibe_rl.planner.offline:OfflinePlanner",
    "openai": "vibe_rl.planner.openai_planner:OpenAIPlanner",
    "anthropic": "vibe_rl.planner.anthropic_planner:AnthropicPlanner",
}


class Planner(Protocol):
    name: str

    def plan(self, text: str) -> TaskSpec: ...


def resolve(name: str = "auto") -> str:
    """The concrete planner name for `name` ('auto' looks at the API-key env vars)."""
    if name == "auto":
        if os.environ.get("OPENAI_API_KEY"):
            return "openai"
        if os.environ.get("ANTHROPIC_API_KEY"):
            return "anthropic"
        return "offline"
    if name not in PLANNERS:
        raise PlannerError(f"Unknown planner {name!r}; choose one of: auto, {', '.join(PLANNERS)}")
    return name


def get_planner(name: str = "auto", **kwargs) -> Planner:
    module, cls = PLANNERS[resolve(name)].split(":")
    return getattr(importlib.import_module(module), cls)(**kwargs)


def plan(text: str, planner: str = "auto", name: str | None = None, family: str | None = None) -> TaskSpec:
    """Plan `text`; `name` overrides the project slug; `family` skips keyword matching and applies that family's
    offline rules (for `turn_based` with an LLM planner, `vibe-rl new` then lets the LLM write the game's rules)."""
    return plan_reviewed(text, planner, name, family)[0]


def plan_reviewed(text: str, planner: str = "auto", name: str | None = None,
                  family: str | None = None) -> tuple[TaskSpec, list[dict]]:
    """`plan`, plus where each value came from (vibe_rl.planner.review: the rows `vibe-rl new` prints)."""
    from vibe_rl.planner.review import review

    if family is not None or resolve(planner) == "offline":  # the family's own rules fill the numbers
        from vibe_rl.planner.offline import OfflinePlanner

        offline = OfflinePlanner()
        spec = offline.plan(text, family=family)
        spec = _renamed(spec, name)
        return spec, review(spec, text, "offline", offline.read)
    spec = _renamed(_with_missing_names(get_planner(planner).plan(text), text), name)
    return spec, review(spec, text, resolve(planner))


def _with_missing_names(spec: TaskSpec, text: str) -> TaskSpec:
    """An LLM's plan plus the clauses whose paths, URLs, env vars or model names it left out (numbers cannot be
    checked without the offline planner's marks)."""
    from vibe_rl.planner.text import SpecText, strings_of

    missing = SpecText(text).unparsed(strings_of(spec.model_dump(mode="json")), numbers=False)
    extra = [clause for clause in missing if clause not in spec.unparsed]
    return spec.model_copy(update={"unparsed": [*spec.unparsed, *extra]}) if extra else spec


def _renamed(spec: TaskSpec, name: str | None) -> TaskSpec:
    if not name:
        return spec
    try:
        return TaskSpec.model_validate({**spec.model_dump(), "name": name})
    except ValueError as exc:
        raise PlannerError(f"--name {name!r} is not a valid project slug: use lowercase letters, digits and _ "
                           f"(e.g. my_spy_game). {exc}") from exc


def load_plan(path: str | Path, name: str | None = None) -> TaskSpec:
    """An edited TaskSpec file, checked as a planner's answer is: the schema, the family, and that it renders."""
    from vibe_rl.errors import ConfigError, TemplateError
    from vibe_rl.scaffold.families import load_family
    from vibe_rl.scaffold.render import render_files

    path = Path(path)
    if not path.is_file():
        raise PlannerError(f"--plan {path} does not exist. Write one with `vibe-rl new SPEC --dry-run --json > "
                           f"{path.name}`, or pass a project's task_spec.json.")
    try:
        spec = _renamed(TaskSpec.load(path), name)
        render_files(spec, load_family(spec.family))
    except (ConfigError, TemplateError) as exc:
        raise PlannerError(f"--plan {path} cannot be rendered: {exc}\nFix the named field in {path} and run "
                           "the command again.") from exc
    return spec
