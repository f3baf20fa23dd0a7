"""The offline planner: picks a template family by its manifest keywords, then applies that family's rules."""

from __future__ import annotations

import importlib

from vibe_rl.errors import PlannerError
from vibe_rl.planner.facts import extract
from vibe_rl.scaffold.families import Manifest, list_families
from vibe_rl.schema.spec import TaskSpec

HOW_TO_GO_FURTHER = (
    "To go further: use an LLM planner (`--planner openai` with OPENAI_API_KEY, or `--planner anthropic` with "
    "ANTHROPIC_API_KEY), or follow the vibe-rl-new skill (skills/vibe-rl-new) to write a new template family: "
    "templates/<family>/ (manifest.yaml + project/) plus vibe_rl/planner/rules/<family>.py."
)


def pick_family(text: str, families: list[Manifest]) -> Manifest:
    """The family whose keywords occur most often in the text; none -> PlannerError."""
    lower = text.lower()
    scores = [(sum(lower.count(word.lower()) for word in m.all_keywords()), m.name, m) for m in families]
    best = max(scores, default=(0, "", None))
    if best[0] == 0 or best[2] is None:
        lines = "\n".join(f"  - {m.name}: {m.description}" for m in families) or "  (none found)"
        raise PlannerError(f"The offline planner found no template family for this spec.\nSupported:\n{lines}\n"
                           f"{HOW_TO_GO_FURTHER}")
    return best[2]


class OfflinePlanner:
    """Rules only: no network, deterministic."""

    name = "offline"

    def plan(self, text: str) -> TaskSpec:
        if not text.strip():
            raise PlannerError("The spec is empty. Describe the task, e.g. vibe-rl new \"who is spy, 8 GPUs, batch 16\".")
        manifest = pick_family(text, list_families())
        try:
            rules = importlib.import_module(f"vibe_rl.planner.rules.{manifest.name}")
        except ModuleNotFoundError as exc:
            raise PlannerError(f"Template family {manifest.name} has no offline rules "
                               f"(vibe_rl/planner/rules/{manifest.name}.py). {HOW_TO_GO_FURTHER}") from exc
        return rules.build(extract(text), manifest)
