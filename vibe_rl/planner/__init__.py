"""Natural language -> TaskSpec. Planners are chosen by a short name and imported lazily:
- `offline`: keyword and regex rules (vibe_rl.planner.offline), no network.
- `openai` / `anthropic`: the official SDKs with structured output: a TaskSpec plus, for every value it sets,
  the words of the spec it quotes; a value whose quote is not in the spec is not used (vibe_rl.planner.quotes).
- `auto`: an LLM planner when OPENAI_API_KEY or ANTHROPIC_API_KEY is set, else offline; offline also when the
  LLM's API fails (the plan's first note says so).
"""

from __future__ import annotations

import os
from pathlib import Path

from vibe_rl.errors import ConfigError, PlannerError, TemplateError
from vibe_rl.schema.spec import TaskSpec

KEYS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}  # the LLM planners, in `auto`'s order


def resolve(name: str = "auto") -> str:
    """The concrete planner name for `name` ('auto' looks at the API-key env vars)."""
    if name == "auto":
        return next((llm for llm, key in KEYS.items() if os.environ.get(key)), "offline")
    if name != "offline" and name not in KEYS:
        raise PlannerError(f"Unknown planner {name!r}; choose one of: auto, offline, {', '.join(KEYS)}")
    return name


def plan(text: str, planner: str = "auto", name: str | None = None, family: str | None = None) -> TaskSpec:
    """Plan `text`; `name` overrides the project slug; `family` skips keyword matching (the LLM is told the
    family; offline, that family's rules apply)."""
    return plan_full(text, planner, name, family)[0]


def plan_full(text: str, planner: str = "auto", name: str | None = None,
              family: str | None = None) -> tuple[TaskSpec, list[dict], str]:
    """(plan, review rows, the planner that made it): the module's docstring says which planner plans. An LLM
    that gives no valid answer counts as failing (the offline reader plans)."""
    from vibe_rl.planner import llm
    from vibe_rl.planner.offline import OfflinePlanner
    from vibe_rl.planner.quotes import check
    from vibe_rl.planner.review import review

    chosen = resolve(planner)
    fallback: list[str] = []
    if chosen != "offline":
        try:
            planner_class = llm.OpenAIPlanner if chosen == "openai" else llm.AnthropicPlanner
            llm_spec, quotes = planner_class().plan_quoted(text, family=family)
        except llm.PlannerUnavailable as exc:
            fallback = [f"The {chosen} planner could not plan this spec ({exc}): planned by the offline reader "
                        "instead."]
        else:
            spec, rows = check(llm_spec, quotes, text)
            return _renamed(spec, name), rows, chosen
    spec = (offline := OfflinePlanner()).plan(text, family=family)
    spec = _renamed(spec.model_copy(update={"notes": [*fallback, *spec.notes]}), name)
    return spec, review(spec, text, "offline", offline.read), "offline (fallback)" if fallback else "offline"


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
