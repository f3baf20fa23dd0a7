"""Doctor checks of the plan itself: can the project learn, and does the TaskSpec agree with the files a run uses.

A clause the planner did not understand (`unparsed`) is a warning. Each of these is an error naming the
file and the fix:
- a mode in which no role reaches a trainable server (nothing is trained);
- a rewarded team none of whose roles plays on the server its reward goes to (the reward trains nothing);
- win reward equal to loss reward, in task_spec.json or in a run file's `WIN, LOSS = ...` (zero advantages);
- a static model a mode's roles call that the serving server's config does not carry, or that names an API
  key env var but neither a URL nor a URL env var (the key is never used; drop it for a frozen local copy);
- a server's GPU count that differs between task_spec.json (servers[].gpus, modes[].gpus), the config
  header and the GPUs a mode's run needs against the node's `gpus`;
- a mode whose script or run file does not exist.
Plausibility (vibe_rl.planner.review's plan_review.json names where each value came from, so each finding
quotes the field's source): |win| or |loss| above 10 (a warning), loss above win (an error: the side learns
to lose), a draw reward outside loss..win, lr outside 1e-7..1e-3, max_tokens under 16 (warnings), and a role the spec's words train ("the
werewolves are trained") that the plan leaves on a static model (a warning).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Protocol

from vibe_rl.errors import VibeRLError
from vibe_rl.schema.job import TrainJob
from vibe_rl.schema.spec import SPEC_FILE, TaskSpec


class Doctor(Protocol):
    """What the plan checks need of `doctor.Doctor`: the project, its parsed files, and where findings go."""

    root: Path
    trees: dict[str, ast.Module]
    unreadable: set[str]

    def add(self, level: str, file: str, line: int, message: str, fix: str) -> None: ...

_HEADER = re.compile(r"^# TrainJob of swarm server '([^']+)' \(port (\d+), (\d+) GPUs")


def check_plan(doc: Doctor, spec: TaskSpec) -> None:
    check_unparsed(doc, spec)
    check_trainable(doc, spec)
    check_rewards(doc, spec)
    check_static(doc, spec)
    check_gpus(doc, spec)
    check_mode_files(doc, spec)
    check_plausible(doc, spec)


def check_unparsed(doc: Doctor, spec: TaskSpec) -> None:
    for clause in spec.unparsed:
        doc.add("warning", SPEC_FILE, 0, f"the planner did not understand {clause!r}: the plan may miss a fact",
                "a setting of the plan (a count, model, size or reward): set its task_spec.json field and re-render "
                "(vibe-rl new --plan task_spec.json --out . --force); a rule of the game: write it in the game's "
                "rules module (game_engine.py or game_rules.py). Then remove the clause from `unparsed`")


def check_trainable(doc: Doctor, spec: TaskSpec) -> None:
    for mode in spec.modes:
        routes = [spec.model_for_role(role, mode.name) for role in spec.roles]
        if not any(r.kind == "server" for r in routes):
            doc.add("error", SPEC_FILE, 0,
                    f"mode {mode.name}: no role reaches a trainable server (every role plays "
                    f"{sorted({r.name for r in routes})}), so nothing is trained",
                    f"wire at least one team to a server of the mode ({', '.join(mode.servers)}): set its "
                    f"teams[].model, or modes[{mode.name}].teams, then re-render with vibe-rl new --plan")


def check_rewards(doc: Doctor, spec: TaskSpec) -> None:
    for mode in spec.modes:
        for server, team_name in mode.rewarded.items():
            team = next(t for t in spec.teams if t.name == team_name)
            where = {spec.model_for_role(role, mode.name).name for role in team.roles}
            if server not in where:
                doc.add("error", SPEC_FILE, 0,
                        f"mode {mode.name}: {server} is rewarded for team {team_name}, but its roles "
                        f"{team.roles} play on {sorted(where)}, so the reward trains nothing",
                        f"reward a team that plays on {server} (modes[{mode.name}].rewarded), or wire "
                        f"{team_name} to {server}")
    # With the family's shaped reward on, dense terms still separate the episodes of a group: equal
    # win and loss then mean "the outcome is not rewarded", worth a look but not an error.
    shaped = bool(spec.game.get("shaped_reward"))
    level = "warning" if shaped else "error"
    consequence = ("only the shaped reward's dense terms are learned from" if shaped
                   else "every GRPO advantage is zero, nothing is learned")
    if spec.reward.win == spec.reward.loss:
        doc.add(level, SPEC_FILE, 0, f"reward.win equals reward.loss ({spec.reward.win:g}): {consequence}",
                "give the winners more than the losers, e.g. win 1, loss 0")
    for mode in spec.modes:
        tree = doc.trees.get(mode.run_file)
        for node in tree.body if tree else []:
            names = [getattr(e, "id", "") for t in getattr(node, "targets", []) for e in getattr(t, "elts", [])]
            if names == ["WIN", "LOSS"] and isinstance(node.value, ast.Tuple):
                values = [_number(v) for v in node.value.elts]
                if values[0] is not None and values[0] == values[1]:
                    doc.add(level, mode.run_file, node.lineno, f"WIN and LOSS are both {values[0]}: {consequence}",
                            "set WIN above LOSS, e.g. WIN, LOSS = 1.0, 0.0")


def _number(node: ast.AST) -> float | None:
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError):
        return None  # not a literal (e.g. read from the environment): nothing to compare
    return float(value) if isinstance(value, (int, float)) else None


def _job(doc: Doctor, config: str) -> TrainJob | None:
    if config in doc.unreadable:
        return None
    try:
        return TrainJob.from_yaml(doc.root / config)
    except (VibeRLError, OSError, UnicodeDecodeError):
        return None  # missing or invalid configs are reported by Doctor.check_sizes


def check_static(doc: Doctor, spec: TaskSpec) -> None:
    for mode in spec.modes:
        server = spec.server(mode.servers[0])
        job = _job(doc, server.config)
        if job is None:
            continue
        configured = {m.name: m for m in job.static_models}
        for role in spec.roles:
            route = spec.model_for_role(role, mode.name)
            if route.kind != "static":
                continue
            model = configured.get(route.name)
            if model is None:
                doc.add("error", server.config, 0,
                        f"mode {mode.name}: {role} players call static model {route.name!r}, which {server.config} "
                        f"does not configure: the server cannot answer them",
                        f"add it under static_models in {server.config} (name: {route.name}, with base_url or "
                        f"base_url_env and api_key_env, or only the name for a frozen local copy)")
            elif model.api_key_env and not (model.base_url or model.base_url_env):
                doc.add("error", server.config, 0,
                        f"static model {route.name!r} names api_key_env {model.api_key_env} but neither base_url "
                        f"nor base_url_env: the key is never used and the calls go to a frozen local copy",
                        "set base_url (or base_url_env) to its OpenAI-compatible URL, or drop api_key_env "
                        "to serve it locally on purpose")


def check_gpus(doc: Doctor, spec: TaskSpec) -> None:
    for server in spec.servers:
        modes = [m for m in spec.modes if server.name in m.servers]
        counts = {m.gpus.get(server.name, server.gpus) for m in modes}
        if modes and server.gpus not in counts:
            doc.add("error", SPEC_FILE, 0,
                    f"{server.name}: servers[].gpus is {server.gpus} but the run plan gives it "
                    f"{sorted(counts)} GPU(s) ({', '.join(f'{m.name}: {m.gpus.get(server.name)}' for m in modes)})",
                    f"make servers[{server.name}].gpus equal to modes[].gpus[{server.name}]")
        path = doc.root / server.config
        readable = path.is_file() and server.config not in doc.unreadable
        first = path.read_text(encoding="utf-8").splitlines()[:1] if readable else []
        header = _HEADER.match(first[0]) if first else None
        if header and int(header.group(3)) != server.gpus:
            doc.add("error", server.config, 1, f"the header says {header.group(3)} GPUs but {SPEC_FILE} gives "
                    f"{server.name} {server.gpus}", "re-render the project (vibe-rl new --plan task_spec.json "
                    "--out . --force) so both say the same")
    for mode in spec.modes:
        need = sum(len(ids) for ids in spec.gpu_split(mode.name).values())
        if spec.gpus and need > spec.gpus:
            doc.add("error", SPEC_FILE, 0, f"mode {mode.name} needs {need} GPUs ({spec.gpu_split(mode.name)}) but "
                    f"gpus (the node) is {spec.gpus}", f"lower modes[{mode.name}].gpus or raise gpus")


def check_mode_files(doc: Doctor, spec: TaskSpec) -> None:
    for mode in spec.modes:
        for kind, file in (("script", mode.script), ("run file", mode.run_file)):
            if not (doc.root / file).is_file():
                doc.add("error", file, 0, f"mode {mode.name} lists {kind} {file}, which does not exist",
                        f"re-render the project, write {file}, or drop mode {mode.name} from {SPEC_FILE}")


def _from(review: dict, field: str) -> str:
    row = review.get(field)
    if not row:
        return "source unknown (no plan_review.json)"
    return f"from the spec: {row['span']!r}" if row.get("span") else f"from {row.get('from')}: {row.get('rule')}"


def check_plausible(doc: Doctor, spec: TaskSpec) -> None:
    from vibe_rl.planner.review import load, load_spec, trained_but_static

    review, (win, loss), lr, tokens = load(doc.root), (spec.reward.win, spec.reward.loss), spec.training.lr, \
        spec.training.max_tokens
    for field, value in (("reward.win", win), ("reward.loss", loss)):
        if abs(value) > 10:
            doc.add("warning", SPEC_FILE, 0, f"{field} is {value:g} ({_from(review, field)}): rewards are usually "
                    "within [-1, 1]; a large one is often a number read from another sentence",
                    f"check {field} in {SPEC_FILE} and re-render (vibe-rl new --plan task_spec.json --out . --force)")
    if loss > win:
        doc.add("error", SPEC_FILE, 0, f"reward.loss ({loss:g}, {_from(review, 'reward.loss')}) is above reward.win "
                f"({win:g}, {_from(review, 'reward.win')}): the trained side learns to lose",
                f"give the winners more than the losers in {SPEC_FILE} and re-render")
    draw = spec.game.get("draw_reward")
    if isinstance(draw, (int, float)) and not isinstance(draw, bool) and not min(win, loss) <= draw <= max(win, loss):
        doc.add("warning", SPEC_FILE, 0, f"game.draw_reward is {draw:g} ({_from(review, 'game.draw_reward')}), outside "
                f"loss..win ({loss:g}..{win:g}): a draw pays more than a win or less than a loss",
                f"set game.draw_reward between reward.loss and reward.win in {SPEC_FILE} and re-render")
    if not 1e-7 <= lr <= 1e-3:
        doc.add("warning", SPEC_FILE, 0, f"training.lr is {lr:g} ({_from(review, 'training.lr')}): outside "
                "1e-7..1e-3, where fine-tuning an LLM usually works (too high diverges, too low learns nothing)",
                f"check training.lr in {SPEC_FILE} (e.g. 1e-6) and re-render")
    if tokens < 16:
        doc.add("warning", SPEC_FILE, 0, f"training.max_tokens is {tokens} ({_from(review, 'training.max_tokens')}): "
                "too few for an answer with a tool call, so most answers are cut off",
                f"raise training.max_tokens in {SPEC_FILE} (e.g. 256) and re-render")
    text = load_spec(doc.root)
    for mode, role, span in trained_but_static(spec, text):
        doc.add("warning", SPEC_FILE, 0, f"mode {mode}: the spec trains the {role} ({span!r}) but the plan leaves "
                f"it on static model {spec.model_for_role(role, mode).name!r} (wire.{mode}.{role})",
                f"wire the {role}'s team to a trainable server (teams[].model or modes[{mode}].teams) and "
                "re-render, or reword the spec if the role is meant to stay static")
