"""An LLM's plan, kept only where the spec says so: a value the LLM sets is used only when its quote of the
spec is in the spec verbatim (whitespace aside), outside its background sentences, and states the value.
Anything else keeps the family's default (its offline rules on a spec that names only the game) and is listed
as not understood, so an LLM's guess is never used silently; a rejected mode list, wiring or static model puts
the whole seating (modes, teams, static models, servers) back to the family's, since those only make sense
together. What the accepted quotes leave unread (a number, path, env var or model name outside them) is
listed as not understood. The rows are those of the review table (vibe_rl.planner.review).
"""

from __future__ import annotations

import re
from contextlib import suppress
from functools import lru_cache
from typing import Any

from vibe_rl.planner.background import blank_background
from vibe_rl.planner.review import WORDS, _family_span, _rows_of, _rule, _states, show
from vibe_rl.planner.text import SpecText, strings_of
from vibe_rl.schema.spec import TaskSpec


def states(quote: str, field: str, value: Any) -> bool:
    """Does the quote state this value? A number must stand in it next to a word that names its field (the
    training table's, the review's WORDS: "4 张卡" is no batch size); a path, URL or model name must be in it.
    Wiring, modes and the family are structure: the quote must exist, which `check` asks already."""
    from vibe_rl.planner.table import TRAINING, words_of

    if field.startswith(("wire.", "modes")) or field == "family" or isinstance(value, bool):
        return True
    if not _states(quote, value):
        return False
    head, _, leaf = field.rpartition(".")
    words = words_of(leaf, TRAINING) if head == "training" else WORDS.get(leaf)
    return not (isinstance(value, (int, float)) and words) or bool(re.search(words, quote, re.IGNORECASE))


@lru_cache(maxsize=16)
def _base_json(family: str) -> str:
    """The family's defaults (see the module's docstring) as JSON: each caller gets a fresh TaskSpec."""
    from vibe_rl.planner.offline import OfflinePlanner
    from vibe_rl.scaffold.families import load_family

    words = load_family(family).all_keywords()
    return OfflinePlanner().plan(words[0] if words else family.replace("_", " "), family=family).model_dump_json()


def _set(data: dict, field: str, value: Any) -> None:
    """Put `value` (None: take it out) at the review row's path in a TaskSpec dict, if that path is there."""
    *path, leaf = field.split(".")
    node: Any = data
    with suppress(KeyError, IndexError, TypeError):  # the path is not there
        for part in path:
            node = node[int(part)] if isinstance(node, list) and part.isdigit() else node[part]
        if isinstance(node, dict) and value is None:
            node.pop(leaf, None)
        elif isinstance(node, dict):
            node[leaf] = value


def check(llm: TaskSpec, quotes: dict[str, str], text: str) -> tuple[TaskSpec, list[dict[str, Any]]]:
    """(the plan with only the quoted values of `llm`, its review rows). See the module's docstring."""
    base = TaskSpec.model_validate_json(_base_json(llm.family))
    blanked, _ = blank_background(text)
    src = SpecText(blanked)
    ours, defaults = dict(_rows_of(llm)), dict(_rows_of(base))  # field -> the raw value of its review row
    accepted: dict[str, tuple[Any, str, tuple[int, int]]] = {}  # field -> (value, its quote, where it is)
    rejected: list[str] = []
    for field, value in ours.items():
        quote = (quotes.get(field) or "").strip()  # found in the spec with runs of whitespace as equal
        where = re.search(r"\s+".join(map(re.escape, quote.split())), text, re.IGNORECASE) if quote else None
        if where is None:
            why = f"its quote {quote!r} is not in the spec" if quote else "it quotes nothing of the spec"
        elif not blanked[where.start():where.end()].strip():
            why = f"its quote {quote!r} is a background sentence (another, an earlier or a possible later training)"
        elif states(quote, field, value):
            accepted[field] = (value, where.group(), where.span())
            continue
        else:
            why = f"its quote {quote!r} does not state that value"
        if field in defaults and value == defaults[field]:
            continue  # the family's default, not the LLM's claim
        kept = f"the default {show(defaults[field])}" if field in defaults else "the family's default"
        rejected.append(f"{field} = {show(value)}: the LLM's value is not used ({why}); the plan keeps {kept}")
    llm = _endpoints(llm, text, rejected)
    plan = _merge(llm, base, accepted, rejected)
    rows = []
    for field, value in _rows_of(plan):
        if field == "family":
            span = accepted[field][1] if field in accepted else _family_span(text, value)
            rows.append({"field": field, "value": value, "from": "llm", "span": span,
                         "rule": None if span else "the LLM's choice: no keyword of the family in the spec, check it"})
        elif field in accepted and accepted[field][0] == value:
            src.mark(*accepted[field][2])  # a quote the plan still holds is understood
            rows.append({"field": field, "value": show(value), "from": "llm", "span": accepted[field][1], "rule": None})
        else:
            rows.append({"field": field, "value": show(value), "from": "default", "span": None,
                         "rule": _rule(base.notes, field)})
    unread = src.unparsed(strings_of(plan.model_dump(mode="json")))
    unparsed = list(dict.fromkeys([*rejected, *llm.unparsed, *unread]))
    return plan.model_copy(update={"unparsed": unparsed}), rows


def _endpoints(llm: TaskSpec, text: str, rejected: list[str]) -> TaskSpec:
    """A static model's base URL and key env var are used when the spec states them or when they are the known
    provider's (vibe_rl.planner.statics.KNOWN_STATIC); an invented one is dropped and listed."""
    from vibe_rl.planner.statics import KNOWN_STATIC

    models = []
    for model in llm.static_models:
        known = next(((url, key) for pattern, url, key in KNOWN_STATIC
                      if re.fullmatch(pattern, model.name, re.IGNORECASE)), (None, None))
        update = {}
        for attr, ours in (("base_url", known[0]), ("api_key_env", known[1]), ("base_url_env", None)):
            if (value := getattr(model, attr)) and value != ours and value.lower() not in text.lower():
                update[attr] = ours
                rejected.append(f"static_models {model.name}: {attr} {value}: the LLM's value is not in the spec "
                                f"and not the provider's; the plan keeps {ours or 'none'}")
        models.append(model.model_copy(update=update) if update else model)
    return llm.model_copy(update={"static_models": models})


def _merge(llm: TaskSpec, base: TaskSpec, accepted: dict[str, tuple], rejected: list[str]) -> TaskSpec:
    """The base plan with the accepted values of `llm`: its seating too unless a structure row was rejected."""
    ours = llm.model_dump(mode="json")
    data = {**base.model_dump(mode="json"), "name": ours["name"], "title": ours["title"] or base.title,
            "description": ours["description"] or base.description}
    seating = {key: ours[key] for key in ("teams", "servers", "static_models", "modes")}
    structure_ok = not any(r.startswith(("modes", "wire.", "static_models.")) for r in rejected)
    for i, server in enumerate(seating["servers"] if structure_ok else []):  # values only from accepted rows
        for leaf in (x for x in ("model_path", "port", "gpus") if f"servers.{i}.{x}" not in accepted):
            if i < len(base.servers):
                server[leaf] = getattr(base.servers[i], leaf)
            else:
                structure_ok = False
    if structure_ok:
        data.update(seating)
    for field, (value, *_) in accepted.items():  # a server's accepted values also onto the family's seating
        if not field.startswith(("family", "modes", "wire.", "static_models.", "servers.")) or \
                field.startswith("servers.") and not structure_ok:
            _set(data, field, value)
    reward = data["reward"]
    reward["description"] = f"win {reward['win']:g}, loss {reward['loss']:g}"
    notes = [f"LLM: {n}" for n in llm.notes]
    data["notes"] = [*notes, "Values the LLM set are used only where it quotes the spec's words for them (the "
                     "review table shows the quote); the rest are the family's defaults."]
    try:
        from vibe_rl.planner.llm import renderable

        return renderable(data)
    except ValueError:  # the accepted values do not fit together: the family's plan, all of the LLM's listed
        rejected.extend(f"{f} = {show(v)}: the LLM's values do not fit together; the plan keeps the default"
                        for f, (v, *_) in accepted.items())
        accepted.clear()
        return base.model_copy(update={"name": data["name"], "notes": data["notes"]})
