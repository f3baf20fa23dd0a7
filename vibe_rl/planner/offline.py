"""The offline planner: picks a template family by its manifest keywords, then applies that family's rules.

A family's rules live next to its templates (`templates/<family>/rules.py`, `build(facts, manifest) ->
TaskSpec`) and are loaded from that file by path: library code never imports `templates/` as a package.
After the rules ran, every number, path, env var or model name of the spec that did not land in the
TaskSpec is listed in `TaskSpec.unparsed` (see vibe_rl.planner.text).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from types import ModuleType

from pydantic import ValidationError

from vibe_rl.errors import PlannerError, TemplateError
from vibe_rl.planner.facts import extract
from vibe_rl.planner.text import strings_of
from vibe_rl.scaffold.families import Manifest, list_families
from vibe_rl.schema.spec import TaskSpec

RULES_FILE = "rules.py"
HOW_TO_GO_FURTHER = (
    "To go further: render the generic skeleton with `--family turn_based` and write its rules module, use an "
    "LLM planner (`--planner openai` with OPENAI_API_KEY, or `--planner anthropic` with ANTHROPIC_API_KEY), or "
    "follow the vibe-rl-new skill (skills/vibe-rl-new) to write a new template family: templates/<family>/ "
    "(manifest.yaml, rules.py, project/)."
)


def pick_family(text: str, families: list[Manifest]) -> Manifest:
    """The family whose keywords occur most often in the text (case, hyphens and underscores aside: "Who-is-Spy"
    is "who is spy"); none -> PlannerError."""
    lower = _words(text)
    scores = [(sum(lower.count(_words(word)) for word in m.all_keywords()), m.name, m) for m in families]
    best = max(scores, default=(0, "", None))
    if best[0] == 0 or best[2] is None:
        lines = "\n".join(f"  - {m.name}: {m.description}" for m in families) or "  (none found)"
        raise PlannerError(f"The offline planner found no template family for this spec.\nSupported:\n{lines}\n"
                           f"{HOW_TO_GO_FURTHER}")
    return best[2]


def _words(text: str) -> str:
    return re.sub(r"[\s_-]+", " ", text.lower())


def load_rules(manifest: Manifest) -> ModuleType:
    """Import `templates/<family>/rules.py` from its file (a private module name per family)."""
    path = manifest.path / RULES_FILE
    if not path.is_file():
        raise PlannerError(f"Template family {manifest.name} has no offline rules ({path}). {HOW_TO_GO_FURTHER}")
    name = f"_vibe_rl_rules_{manifest.name}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and typing need the module registered while it executes
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise PlannerError(f"{path} failed to load: {type(exc).__name__}: {exc}. Fix the rules file.") from exc
    if not callable(getattr(module, "build", None)):
        raise PlannerError(f"{path} has no build(facts, manifest) -> TaskSpec function.")
    return module


def plan_with(manifest: Manifest, text: str) -> TaskSpec:
    """Apply one family's rules to `text` and list what was not understood."""
    facts = extract(text)
    try:
        spec = load_rules(manifest).build(facts, manifest)
    except ValidationError as exc:  # a number the spec gave that the plan cannot hold ("batch 0")
        wrong = "; ".join(f"{'.'.join(str(p) for p in e['loc'])} = {e.get('input')!r}: {e['msg']}"
                          for e in exc.errors())
        raise PlannerError(f"The spec asks for a value the plan cannot take ({wrong}). Change it in the spec, or "
                           "plan with --dry-run --json, fix task_spec.json and render it with `vibe-rl new --plan`."
                           ) from None
    except TemplateError as exc:  # a game parameter outside the family's bounds
        raise PlannerError(str(exc)) from None
    unparsed = facts.src.unparsed(strings_of(spec.model_dump(mode="json")))
    return spec.model_copy(update={"unparsed": unparsed})


class OfflinePlanner:
    """Rules only: no network, deterministic."""

    name = "offline"

    def plan(self, text: str, family: str | None = None) -> TaskSpec:
        if not text.strip():
            raise PlannerError("The spec is empty. Describe the task, e.g. vibe-rl new \"who is spy, 8 GPUs, batch 16\".")
        families = list_families()
        if family is not None:
            chosen = next((m for m in families if m.name == family), None)
            if chosen is None:
                raise PlannerError(f"--family {family}: no such template family; families: "
                                   f"{', '.join(m.name for m in families)}.")
            return plan_with(chosen, text)
        return plan_with(pick_family(text, [m for m in families if m.keywords]), text)
