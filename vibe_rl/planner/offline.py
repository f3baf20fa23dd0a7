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
from vibe_rl.planner.background import blank_background
from vibe_rl.planner.common import check_gpu_budget
from vibe_rl.planner.corrections import apply_corrections
from vibe_rl.planner.counts import rewrite_counts
from vibe_rl.planner.facts import extract
from vibe_rl.planner.nodes import rewrite_nodes
from vibe_rl.planner.numbers import rewrite_grouped, rewrite_scientific
from vibe_rl.planner.resemble import differs_note, unknown_game_hint
from vibe_rl.planner.terse import expand_terse
from vibe_rl.planner.text import strings_of
from vibe_rl.planner.typos import fix_typos
from vibe_rl.planner.unsupported import check_supported
from vibe_rl.scaffold.families import Manifest, list_families
from vibe_rl.schema.spec import TaskSpec

RULES_FILE = "rules.py"
# The rewrites before any rule reads the spec, in order: background blanked, layouts and misspellings as prose,
# unsupported asks refused, then count, number, node and correction phrasings as plain values
REWRITES = (blank_background, expand_terse, fix_typos, check_supported, rewrite_counts, rewrite_scientific,
            rewrite_grouped, rewrite_nodes, apply_corrections)
HOW_TO_GO_FURTHER = (
    "To go further: render the generic skeleton with `--family turn_based` and write its rules module, use an "
    "LLM planner (`--planner openai` with OPENAI_API_KEY, or `--planner anthropic` with ANTHROPIC_API_KEY), or "
    "follow the vibe-rl-new skill (skills/vibe-rl-new) to write a new template family: templates/<family>/ "
    "(manifest.yaml, rules.py, project/)."
)


def family_scores(text: str, families: list[Manifest]) -> list[tuple[int, str, Manifest]]:
    """(keyword hits, name, manifest) per family, most hits first (case, hyphens and underscores aside:
    "Who-is-Spy" is "who is spy")."""
    lower = _words(text)
    scores = [(sum(lower.count(_words(word)) for word in m.all_keywords()), m.name, m) for m in families]
    return sorted(scores, key=lambda item: (item[0], item[1]), reverse=True)


def pick_family(text: str, families: list[Manifest]) -> Manifest:
    """The family whose keywords occur most often in the text; none -> PlannerError that lists the families."""
    scores = family_scores(text, families)
    if not scores or scores[0][0] == 0:
        lines = "\n".join(f"  - {m.name}: {m.description}" for m in families) or "  (none found)"
        raise PlannerError("The offline planner does not know the game or task of this spec: no template family's "
                           f"keywords occur in it.\n{unknown_game_hint(text, families)}Families it knows:\n{lines}\n"
                           f"{HOW_TO_GO_FURTHER}")
    return scores[0][2]


def _also_named(text: str, families: list[Manifest], chosen: Manifest) -> list[str]:
    """A note when other families' keywords occur too: the plan covers one family only."""
    others = [f"{name} ({hits})" for hits, name, _ in family_scores(text, families) if hits and name != chosen.name]
    if not others:
        return []
    tie = family_scores(text, families)[1][0] == family_scores(text, families)[0][0]
    return [f"The spec also names {', '.join(others)} (keyword hits); planned as {chosen.name} only"
            + (" (as many hits: check that this is the game you mean)" if tie else ", the family named most")
            + ". Plan the other one with its own spec, or pass --family to choose."]


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


def plan_with(manifest: Manifest, text: str, notes: list[str] | None = None, keep: list | None = None) -> TaskSpec:
    """Apply one family's rules to `text` and list what was not understood (`notes` go first in the plan's);
    `keep` receives the marked text (where each value was read: vibe_rl.planner.review)."""
    facts = extract(text)
    if keep is not None:
        keep.append(facts.src)
    facts.notes[:0] = notes or []
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
    notes = list(spec.notes)
    check_gpu_budget(spec.gpus, {m.name: {s.name: m.gpus.get(s.name, s.gpus) for s in spec.servers
                                          if s.name in m.servers} for m in spec.modes}, notes)
    return spec.model_copy(update={"unparsed": unparsed, "notes": notes})


class OfflinePlanner:
    """Rules only: no network, deterministic."""

    name = "offline"

    def __init__(self) -> None:
        self.read = None  # the marked SpecText of the last plan (vibe_rl.planner.review reads its sources)

    def plan(self, text: str, family: str | None = None) -> TaskSpec:
        if not text.strip():
            raise PlannerError("The spec is empty. Describe the task, e.g. vibe-rl new \"who is spy, 8 GPUs, batch 16\".")
        notes: list[str] = []
        for rewrite in REWRITES:  # each (text -> text, notes); check_supported refuses what no plan holds
            text, said = rewrite(text)
            notes += said
        families = list_families()
        if family is not None:
            chosen = next((m for m in families if m.name == family), None)
            if chosen is None:
                raise PlannerError(f"--family {family}: no such template family; families: "
                                   f"{', '.join(m.name for m in families)}.")
            return self._plan(chosen, text, notes)
        matched = [m for m in families if m.keywords]
        chosen = pick_family(text, matched)
        return self._plan(chosen, text, notes + differs_note(text, chosen) + _also_named(text, matched, chosen))

    def _plan(self, manifest: Manifest, text: str, notes: list[str]) -> TaskSpec:
        keep: list = []
        spec = plan_with(manifest, text, notes, keep)
        self.read = keep[0]
        return spec
