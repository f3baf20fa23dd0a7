"""Offline planner rules of the multi_model_translation family (loaded by file path; `build(facts, manifest)`).

Agents go to servers line by line: a line naming "Agent N" and "server M" (or a model path, a port) puts agent
N on server M; per-server model paths, ports and GPU counts are the shared server facts (planner.servers).
Defaults follow the seed, each noted: agents 1 and 3 on server 1, agent 2 on server 2, server N on port
10085 + N. The vocabulary (agents, role words, reward terms, other languages, domains) is words.yaml."""

from __future__ import annotations

import re

from vibe_rl.planner import common
from vibe_rl.planner.facts import Facts
from vibe_rl.planner.servers import server_segments
from vibe_rl.planner.statics import mentions
from vibe_rl.planner.text import Found
from vibe_rl.scaffold.families import Manifest, family_words
from vibe_rl.schema.spec import Mode, RewardScheme, Server, TaskSpec, Team

WORDS = family_words(__file__)
AGENT_ROLES = {1: "rough_translator", 2: "detector", 3: "final_translator"}


def agent_servers(facts: Facts) -> dict[int, int]:
    """Agent number -> 0-based server index: each "Agent N" goes to the server named in its clause segment
    (or the nearest one, as for model paths and ports)."""
    server_of: dict[int, int] = {}
    for start, end in facts.src.clauses():
        segments = server_segments(facts.src, start, end)
        for m in re.finditer(WORDS["agent"], facts.text[start:end], re.IGNORECASE):
            agent = int(m.group(1))
            index = next((i for a, b, i in segments if a <= start + m.start() < b), None)
            if agent in AGENT_ROLES and index is not None:
                server_of.setdefault(agent, index)
    return server_of


def role_paths(facts: Facts) -> dict[int, Found]:
    """Model paths said of agents by role ("the detector gets /m/3b, the translators share /m/7b"): agent ->
    path, read from the words between the previous path (or the clause start) and each (WORDS["roles"])."""
    out: dict[int, Found] = {}
    for path in facts.model_paths:
        start = max([facts.src.clause_of(path.start)[0]] + [p.end for p in facts.model_paths if p.end <= path.start])
        for agent, words in WORDS["roles"].items():
            if re.search(words, facts.text[start:path.start], re.IGNORECASE):
                out.setdefault(agent, path)
    return out


def judge(facts: Facts, game: dict, notes: list[str]) -> None:
    """The LLM judge's env var prefix (JUDGE in JUDGE_MODEL, JUDGE_BASE_URL, JUDGE_API_KEY). A model the spec
    names to judge ("评委模型 gpt-4o", "judge = deepseek-chat") gets a note on the env vars to set for it."""
    envs = list(facts.src.finditer(WORDS["judge_env"]))
    prefixes = {m.group(1) for m in envs if m.group(1) not in ("OPENAI", "ANTHROPIC", "DASHSCOPE", "DEEPSEEK")}
    if len(prefixes) == 1:
        game["judge_env_prefix"] = prefixes.pop()
        for m in [m for m in envs if m.group(1) == game["judge_env_prefix"]]:
            facts.src.mark(*m.span())
    elif not facts.judges:
        notes.append("No single LLM judge env prefix given: graders read JUDGE_MODEL, _BASE_URL, _API_KEY "
                     "and fall back to rule-based grading.")
    prefix = game.get("judge_env_prefix", "JUDGE")
    for model in facts.judges:
        for m in mentions(facts.text, model.name):
            facts.src.mark(*m.span())
        url = model.base_url or "its OpenAI-compatible URL"
        key = f" (your ${model.api_key_env})" if model.api_key_env else ""
        notes.append(f"Judge {model.name}: the graders ask it when {prefix}_MODEL={model.name}, {prefix}_BASE_URL={url} "
                     f"and {prefix}_API_KEY{key} are set where the servers start; without them they grade by rules.")


def build(facts: Facts, manifest: Manifest) -> TaskSpec:
    notes: list[str] = list(facts.notes)
    for m in facts.src.finditer(WORDS["score_range"]):
        facts.src.mark(*m.span())
    game: dict = {}
    judge(facts, game, notes)
    if other := facts.src.search(WORDS["other_languages"], mark=False):
        notes.append(f"The spec names {other.group()}, but this family translates English -> Chinese only (its mock "
                     "dataset, prompts and graders): the project renders for English -> Chinese. To change the pair, "
                     "edit mock_dataset.py, the prompts in workflow.py and the graders after rendering.")
    if domain := facts.src.search(WORDS["other_domains"], mark=False):
        notes.append(f"The spec names {domain.group()!r} text, but this family's mock dataset, prompts and graders "
                     "are for academic paper paragraphs: the project renders for academic paragraphs. To change the "
                     "domain, edit mock_dataset.py (mock_paragraphs.json), the prompts in workflow.py and the "
                     "graders after rendering.")
    common.game_parameter(facts, game, "num_tasks", None, notes, manifest, "mock dataset size")
    lines = agent_servers(facts)
    server_of = {1: 0, 2: 1, 3: 0, **lines}  # agent -> server index
    path_of: dict[int, Found] = {}  # server index -> a path said of its agents by role
    by_role = {} if lines else role_paths(facts)
    if facts.src.search(WORDS["own_server"]) and not lines:
        server_of = {1: 0, 2: 1, 3: 2}
        notes.append("Each agent on its own server, as the spec asks: agent N on serverN.")
    elif next(facts.src.finditer(WORDS["one_server"]), None) and not lines:  # an aside may hold a line break
        server_of = {1: 0, 2: 0, 3: 0}
        notes.append("All three agents on server1, as the spec asks: one trained model plays every role.")
    elif len({p.start for p in by_role.values()}) > 1:  # two paths for two groups of agents
        first = by_role.get(1) or by_role[min(by_role)]
        server_of = {a: 0 if by_role.get(a, first) is first else 1 for a in AGENT_ROLES}
        path_of = {server_of[a]: path for a, path in by_role.items()}
        notes.append("Agents go to servers by the model the spec names for their role: "
                     + "; ".join(f"agent {a} ({AGENT_ROLES[a]}) on server{server_of[a] + 1}" for a in AGENT_ROLES) + ".")
    elif not lines:
        notes.append("No agent -> server lines found: agents 1 and 3 on server1, agent 2 on server2.")
    count = max(server_of.values()) + 1
    total, g = facts.use(facts.gpus.total), facts.gpus
    per_server = common.first_given(facts.use(g.per_server), facts.use(g.mode_per_server.get("agent_roll")))
    servers, teams, trains, graders, loose, own = [], [], [], {}, list(facts.ports), dict(facts.servers)
    if path_of and own and all(s.implicit for s in own.values()):  # servers numbered by path order: follow the roles
        by_path = {s.path.value: s for s in own.values() if s.path}
        own = {i: by_path[p.value] for i, p in path_of.items() if p.value in by_path} or own
    for i in range(count):
        name, s = f"server{i + 1}", own.get(i)
        path = facts.use(s.path if s else None) or facts.use(path_of.get(i)) or (
            facts.use(facts.model_paths[0]) if i == 0 and facts.model_paths and not path_of else None)
        if path is None and i == 0:
            path = common.no_model_path(facts, notes, name)
        elif path is None:
            path = servers[0].model_path
            notes.append(f"No base model path for {name}: using {path!r}.")
        if (port := facts.use(s.port if s and s.port else (loose.pop(0) if loose else None))) is None:
            port = 10086 + i
            notes.append(f"No port for {name}: using {port}.")
        if (gpus := common.first_given(facts.use(s.gpus if s else None), per_server)) is None:
            gpus = 0 if total == 0 else max((total or count) // count, 1)
            notes.append(f"No GPU count for {name}: using {gpus}" + (f" (the {total} in total split evenly)."
                                                                      if total else "."))
        servers.append(Server(name=name, port=port, model_path=path, gpus=gpus,
                              config="config.yaml" if i == 0 else f"config_server{i + 1}.yaml",
                              url_env="VIBE_RL_SWARM_URL" + (f"_{i + 1}" if i else "")))
        if roles := [AGENT_ROLES[a] for a in sorted(AGENT_ROLES) if server_of[a] == i]:
            team = roles[0] if len(roles) == 1 else f"agents_{name}" if "detector" in roles else "translators"
            teams.append(Team(name=team, roles=roles, model=name))
            trains.append(f"{name} ({path}) trains the {' and '.join(roles)}")
            graders[name] = "ProperNounDetectionGrader" if team == "detector" else "TranslationQualityGrader"
    if total is None:
        total = sum(s.gpus for s in servers)
        notes.append(f"No total GPU count given: the node needs {total}.")
    if facts.static_models:
        notes.append("Static models are not used by this family: every agent trains on its server.")
    if said := facts.src.search(WORDS["reward_words"], mark=False):
        notes.append(f"The spec describes its own reward ('{said.group().strip()}' ...), but this family's rewards "
                     f"are its graders ({', '.join(sorted(set(graders.values())))}, each 0-2 normalised to "
                     "[0, 1]): the spec's reward terms are not applied. To use them, edit the graders' grade() in "
                     "workflow.py after rendering.")
    modes = common.planned_modes(facts, [Mode(
        name="agent_roll", script="agent_roll.py", run_file="agent_run.py", servers=[s.name for s in servers],
        rewarded={t.model: t.name for t in teams}, gpus={s.name: s.gpus for s in servers})], notes)
    return TaskSpec(
        family=manifest.name, name=manifest.name, short_name=common.short_name(facts, manifest, notes),
        title="Multi-model academic translation: non-shared-parameter GRPO",
        description=("Three agents translate English academic paragraphs into Chinese (draft, proper-noun "
                     f"review, final); {'; '.join(trains)}. Each server is rewarded by its own grader."),
        gpus=total, game=manifest.resolve_parameters(game), teams=teams, servers=servers,
        training=common.training(facts, notes, batch_size=32, grpo_n=4, max_tokens=512), modes=modes,
        reward=RewardScheme(win=1.0, loss=0.0, description="; ".join(
            f"{server}: {grader} (0-2, normalised to [0, 1])" for server, grader in graders.items())),
        constraints=common.constraints(facts, notes, random_ids=False, tools=False), notes=notes,
    )
