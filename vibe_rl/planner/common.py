"""Helpers every family's rules use, so that each default a plan takes is written to `notes` the same way."""

from __future__ import annotations

import re
from typing import Any

from vibe_rl.errors import PlannerError
from vibe_rl.planner.facts import Facts, Found
from vibe_rl.scaffold.families import Manifest
from vibe_rl.schema.job import StaticModel
from vibe_rl.schema.spec import Constraints, Mode, RewardScheme, Training


def training(facts: Facts, notes: list[str], batch_size: int, grpo_n: int, **defaults: Any) -> Training:
    """The Training block: the spec's numbers, else the family's defaults (each one noted)."""
    chosen = {"batch_size": batch_size, "grpo_n": grpo_n, **defaults}
    base, others = Training(), []
    for name in Training.model_fields:
        if (value := facts.training.get(name)) is not None:
            chosen[name] = value
        elif name in ("batch_size", "grpo_n", "save_freq"):
            notes.append(f"No {name} given: using {chosen.get(name, getattr(base, name))}.")
        elif name not in ("total_steps", "max_model_len"):
            others.append(f"{name} {chosen.get(name, getattr(base, name)):g}")
    limit = "" if "total_steps" in facts.training else "; no step limit unless total_steps is given"
    if others:
        notes.append(f"Defaults not in the spec: {', '.join(others)}{limit}.")
    elif limit:
        notes.append("No total_steps given: no step limit.")
    return Training(**chosen)


def first_given(*values: Any) -> Any:
    """The first value that is not None (0 is a value: '0 GPUs' means CPU)."""
    return next((v for v in values if v is not None), None)


def check_gpu_budget(spec_gpus: int, needs: dict[str, dict[str, int]], notes: list[str]) -> None:
    """A mode whose servers need more GPUs than the node has is a PlannerError that names the fix; 0 GPUs is
    noted (the servers run on the CPU)."""
    for mode, per_server in needs.items():
        if sum(per_server.values()) > spec_gpus:
            split = ", ".join(f"{name} {gpus}" for name, gpus in per_server.items())
            raise PlannerError(
                f"Mode {mode} runs {len(per_server)} server(s) on separate GPUs ({split}: {sum(per_server.values())} "
                f"in all) but the spec gives {spec_gpus} GPU(s) in total. Give fewer GPUs per server, a larger "
                f"total, or leave the mode out (e.g. 'no {mode}' or 'only agent_roll').")
    if spec_gpus == 0:
        notes.append("0 GPUs: the servers run on the CPU. That suits the tiny offline model; a real model is very "
                     "slow there.")


def constraints(facts: Facts, notes: list[str], random_ids: bool, tools: bool = True) -> Constraints:
    """English-only code always; shuffled ids and names as the family does (noted when the spec is silent)."""
    if not facts.no_chinese:
        notes.append("Code, comments and prompts in code are English only (the default).")
    if random_ids and not facts.random_names:
        notes.append("Player ids and names are drawn at random every episode (the family's default).")
    return Constraints(no_chinese_in_code=True, random_ids_and_names=random_ids, use_openai_sdk_tools=tools)


def reward(facts: Facts, notes: list[str], per: str = "") -> RewardScheme:
    win, loss = first_given(facts.win, 1.0), first_given(facts.loss, 0.0)
    if facts.win is None or facts.loss is None:
        notes.append(f"Reward not fully given: win {win:g}, loss {loss:g}.")
    if win == loss:
        notes.append(f"Win and loss rewards are both {win:g}: every GRPO advantage is zero and nothing is learned "
                     "(`vibe-rl doctor` reports it). Give the winners more than the losers.")
    return RewardScheme(win=win, loss=loss, description=f"win {win:g}, loss {loss:g}{per}")


def game_parameter(facts: Facts, game: dict[str, Any], name: str, found: Found | None, notes: list[str],
                   manifest: Manifest, what: str) -> None:
    """Set a manifest parameter from a found value, else from a line keyed by its own name ("max_days: 8",
    "learner_seat: 1": a spec in the plan's own words is read exactly), else note its default."""
    if found is None and name in manifest.parameters:
        m = facts.src.search(rf"(?<![\w.]){re.escape(name)}\s*[:：=]\s*(-?\d+(?:\.\d+)?)(?![\w.])", mark=False)
        found = tabled(facts, name, manifest, notes) if m is None else \
            Found((float if "." in m.group(1) else int)(m.group(1)), *m.span())
    if found is not None:
        game[name] = facts.use(found)
        facts.src.source(f"game.{name}", found.start, found.end)
    elif name in manifest.parameters:
        notes.append(f"No {what} given: using {name} = {manifest.parameters[name].default}.")


def tabled(facts: Facts, name: str, manifest: Manifest, notes: list[str], rows: list | None = None) -> Found | None:
    """The parameter's row of the family's table (manifest `parameters.<name>.words`, else the shared GAME rows;
    or `rows`), read by the one table reader; the value's span is its source."""
    from vibe_rl.planner.table import GAME, Row, read

    param = manifest.parameters[name]
    w = param.words
    rows = rows or [Row(name, tuple(w.en), tuple(w.zh), type(param.default) if isinstance(param.default, float) else int,
                param.min, param.max, tuple(w.unit), tuple(w.after))] if w else [r for r in GAME if r.field == name]
    value = read(facts.src, rows, notes, facts.claimed, prefix="game.").get(name)
    return None if value is None else Found(value, *facts.src.sources[f"game.{name}"])


def planned_modes(facts: Facts, modes: list[Mode], notes: list[str], asked: tuple[str, ...] = ()) -> list[Mode]:
    """The family's modes minus the excluded ones (only the requested ones when the spec says 'only'). Those
    the spec names ("对抗模式") or the family's rules read from its words (`asked`: "both sides train") come
    first, in the order the spec names them: `vibe-rl run` starts the first mode, the one asked for."""
    names = [m.name for m in modes]
    keep = [m for m in modes if m.name in facts.modes_only] if facts.modes_only else \
        [m for m in modes if m.name not in facts.modes_excluded]
    named = [n for n in dict.fromkeys([*facts.modes_named, *asked]) if n in names]
    keep.sort(key=lambda m: named.index(m.name) if m.name in named else len(named))
    notes.extend(f"Mode {m} left out: the spec excludes it." for m in facts.modes_excluded if m in names)
    if facts.modes_only:
        notes.append(f"Only mode(s) {', '.join(m.name for m in keep)} planned, as the spec asks.")
    elif len(keep) > 1:
        why = " (the mode the spec asks for)" if keep[0].name in named and len(named) < len(keep) else ""
        notes.append(f"Modes planned: {', '.join(m.name for m in keep)}; `vibe-rl run` starts {keep[0].name}{why} "
                     f"unless --mode says otherwise.")
        added = [m.name for m in keep if m.name not in named]
        if added and len(added) < len(keep):
            notes.append(f"Mode(s) {', '.join(added)} added although the spec does not name them (the family "
                         f"has them); say 'no {added[0]}' to leave one out.")
    return keep or modes[:1]


def short_name(facts: Facts, manifest: Manifest, notes: list[str]) -> str:
    if facts.short_name and facts.short_name != manifest.short_name:
        notes.append(f"tmux prefix {facts.short_name!r} taken from the session names in the spec.")
    return facts.short_name or manifest.short_name


def static_endpoint(facts: Facts, model: StaticModel) -> StaticModel:
    """The static model with the spec's env vars: a *_BASE_URL env var replaces a fixed URL, and a named
    *_API_KEY env var replaces the provider's default one."""
    model = model.model_copy()
    if url_env := re.search(r"\b([A-Z][A-Z0-9_]*_BASE_URL)\b", facts.text):
        model.base_url, model.base_url_env = None, url_env.group(1)
    keys = re.findall(r"\b([A-Z][A-Z0-9_]*_API_KEY)\b", facts.text)
    if keys and (model.base_url or model.base_url_env) and model.api_key_env not in keys:
        model.api_key_env = keys[0]  # with no URL a key is never used (doctor reports it): static_note says so
    return model


def static_opponent(facts: Facts, notes: list[str], who: str) -> StaticModel:
    """The spec's first static model (with the spec's env vars for it), else 'opponent', the frozen local copy of
    the trainable model that `who` then play (noted)."""
    if facts.static_models:
        return static_endpoint(facts, facts.static_models[0][1])
    notes.append(f"No opponent model named: {who} play 'opponent', a frozen local copy of the trainable model.")
    return StaticModel(name="opponent")


def static_note(facts: Facts, model: StaticModel, notes: list[str]) -> None:
    """Note a provider URL the planner filled in from its table of known models (the spec did not give it)."""
    if model.base_url and model.base_url not in facts.text:
        notes.append(f"Static model {model.name}: base URL {model.base_url} filled in (a known provider), key from "
                     f"${model.api_key_env}; without that key the server serves a frozen local copy.")
    elif env := model.base_url_env:
        key = f"${model.api_key_env}" if model.api_key_env else ""
        if env in facts.text:
            how = f"URL from ${env}{key and ', key from ' + key}, read when the server starts"
        else:  # the key given, the URL env var ours (vibe_rl.planner.statics)
            key = f"${model.api_key_env}"
            how = (f"key from {key}, but the spec gives no URL for it: set ${env} to its OpenAI-compatible "
                   f"base URL where the server starts (the server reads base_url_env {env} then)")
        notes.append(f"Static model {model.name}: {how}; while ${env}{key and ' or ' + key} is unset the "
                     "server serves a frozen local copy of the trainable model under that name and says so.")
    elif not model.base_url and model.name != "opponent":
        keys = re.findall(r"\b([A-Z][A-Z0-9_]*_API_KEY)\b", facts.text)
        notes.append(f"Static model {model.name}: the spec gives no URL for it and it is not a provider the planner "
                     f"knows, so the server serves it as a frozen local copy of the trainable model under that name. "
                     f"To call the real {model.name}, set base_url (or base_url_env, an env var holding the URL) and "
                     f"api_key_env{f' ({keys[0]})' if keys else ''} for it under static_models in the config YAML "
                     f"after rendering, or give its URL in the spec ('{model.name} served at "
                     f"http://HOST:PORT/v1').")


def first_server(facts: Facts, notes: list[str]) -> tuple[str, int, int, int]:
    """(model path, port, GPUs, total GPUs) of a family's one server, server1, as the spec says them of it (or
    of no server), else noted defaults: 'tiny', port 10086, 1 GPU (the total if given), total = its GPUs."""
    first = facts.server_path(0) or (facts.model_paths[0] if facts.model_paths else None)
    path = facts.use(first) if first is not None else no_model_path(facts, notes)
    own, g = facts.servers.get(0), facts.gpus
    total = facts.use(g.total)
    gpus = first_given(facts.use(g.mode_per_server.get("agent_roll")), facts.use(own.gpus if own else None),
                       facts.use(g.per_server))
    if gpus is None:
        gpus = 1 if total is None else total
        notes.append(f"No GPU count for server1: using {gpus}" + (" (the total)." if total else "."))
    if total is None:
        total = gpus
        notes.append(f"No total GPU count given: the node needs {total}.")
    port = facts.use(own.port if own and own.port else (facts.ports[0] if facts.ports else None))
    if port is None:
        port = 10086
        notes.append("No port given: server1 on 10086.")
    return path, port, gpus, total


def no_model_path(facts: Facts, notes: list[str], server: str = "") -> str:
    """The path of a trainable model the spec does not name ('tiny'), with a note that says what to do."""
    if facts.model_size:
        notes.append(f"The spec asks for a {facts.model_size}B model but names no model directory: using the tiny "
                     "offline model ('tiny'). Put the model's local directory in servers[].model_path of "
                     "task_spec.json and render it with `vibe-rl new --plan`, or name the path in the spec.")
    else:
        notes.append(f"No base model path for {server}: using 'tiny'." if server else
                     "No base model path found: using the tiny offline model ('tiny').")
    return "tiny"
