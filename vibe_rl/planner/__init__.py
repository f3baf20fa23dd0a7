"""Natural language -> TaskSpec. Planners are chosen by a short name and imported lazily.

- `offline`: keyword and regex rules (vibe_rl.planner.offline), no network.
- `openai` / `anthropic`: the official SDKs with structured output against the TaskSpec JSON schema.
- `auto`: an LLM planner when OPENAI_API_KEY or ANTHROPIC_API_KEY is set, else offline.
"""

from __future__ import annotations

import importlib
import os
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


def plan(text: str, planner: str = "auto", name: str | None = None) -> TaskSpec:
    """Plan `text`; `name` overrides the project slug."""
    spec = get_planner(planner).plan(text)
    if name:
        try:
            spec = TaskSpec.model_validate({**spec.model_dump(), "name": name})
        except ValueError as exc:
            raise PlannerError(f"--name {name!r} is not a valid project slug: use lowercase letters, digits and _ "
                               f"(e.g. my_spy_game). {exc}") from exc
    return spec
