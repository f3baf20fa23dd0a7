"""Offline rules for the multi_model_translation family.

Servers are read line by line: a line that names a model path, a port or "server N" describes one swarm
server, and the agents it names ("Agent 1", "Agent 3") run on it. Defaults follow the seed: agents 1 and 3
on server 1 (port 10086), agent 2 on server 2 (port 10087), the GPUs split evenly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from vibe_rl.planner.facts import Facts, model_path
from vibe_rl.scaffold.families import Manifest
from vibe_rl.schema.spec import Constraints, Mode, RewardScheme, Server, TaskSpec, Team, Training

AGENT_ROLES = {1: "rough_translator", 2: "detector", 3: "final_translator"}
DEFAULT_SERVER_OF = {1: 0, 2: 1, 3: 0}  # agent -> server index
FIRST_PORT = 10086  # server N listens on FIRST_PORT + N - 1 unless the spec says otherwise
_GPUS = r"(\d+)\s*(?:x\s*)?(?:gpus?|张\s*(?:显)?卡|个\s*(?:显卡|gpu)|块\s*(?:显卡|gpu)|cards?)"
_PORT = r"(?:端口|port)\s*[:：=]?\s*(\d{2,5})"
_SERVER = r"(?:swarm\s*)?(?:server|服务器)\s*(\d)"
_AGENT = r"(?:agent|智能体)\s*(\d)"


@dataclass
class ServerLine:
    index: int | None = None
    path: str | None = None
    port: int | None = None
    gpus: int | None = None
    agents: list[int] = field(default_factory=list)


def server_lines(text: str) -> list[ServerLine]:
    found = []
    for line in text.splitlines():
        path, port = model_path(line), re.search(_PORT, line, re.IGNORECASE)
        server = re.search(_SERVER, line, re.IGNORECASE)
        if not (path or port or server):
            continue
        gpus = re.search(_GPUS, line, re.IGNORECASE)
        agents = [int(a) for a in re.findall(_AGENT, line, re.IGNORECASE) if int(a) in AGENT_ROLES]
        found.append(ServerLine(int(server.group(1)) - 1 if server else None, path,
                                int(port.group(1)) if port else None, int(gpus.group(1)) if gpus else None, agents))
    return [s for s in found if s.agents or s.index is not None][:2]


def build(facts: Facts, manifest: Manifest) -> TaskSpec:
    notes: list[str] = []
    lines = server_lines(facts.text)
    server_of = dict(DEFAULT_SERVER_OF)
    for position, line in enumerate(lines):
        for agent in line.agents:
            server_of[agent] = line.index if line.index is not None else position
    count = max(server_of.values()) + 1
    by_index = {(s.index if s.index is not None else i): s for i, s in enumerate(lines)}
    total = facts.total_gpus or 1
    servers, teams = [], []
    for i in range(count):
        line = by_index.get(i, ServerLine())
        name = f"server{i + 1}"
        path = line.path or facts.model_path or "tiny"
        if not (line.path or facts.model_path):
            notes.append(f"No base model path for {name}: using the tiny offline model ('tiny').")
        servers.append(Server(name=name, port=line.port or FIRST_PORT + i, model_path=path,
                              gpus=line.gpus or max(total // count, 1), config="config.yaml" if i == 0 else
                              f"config_server{i + 1}.yaml", url_env="VIBE_RL_SWARM_URL" + (f"_{i + 1}" if i else "")))
        roles = [AGENT_ROLES[a] for a in sorted(AGENT_ROLES) if server_of[a] == i]
        team = "detector" if roles == ["detector"] else "translators" if "detector" not in roles else f"agents_{name}"
        teams.append(Team(name=team, roles=roles, model=name))
    if not lines:
        notes.append("No per-server lines found: agents 1 and 3 on server1 (port 10086), agent 2 on server2 "
                     "(port 10087), GPUs split evenly.")
    if facts.static_models:
        notes.append("Static models are not used by this family: every agent trains on its server.")
    training = Training(batch_size=facts.batch_size or 32, grpo_n=facts.grpo_n or 4, max_tokens=512,
                        save_freq=facts.save_freq if facts.save_freq is not None else 5)
    if facts.lr:
        training.lr = facts.lr
    for value, default, what in ((facts.batch_size, 32, "batch size"), (facts.grpo_n, 4, "grpo_n")):
        if value is None:
            notes.append(f"No {what} given: using {default}.")
    names = [s.name for s in servers]
    graders = {t.model: "ProperNounDetectionGrader" if t.name == "detector" else "TranslationQualityGrader"
               for t in teams}
    return TaskSpec(
        family=manifest.name, name=manifest.name, short_name=manifest.short_name,
        title="Multi-model academic translation: non-shared-parameter GRPO",
        description=("Three agents translate English academic paragraphs into Chinese (draft, proper-noun "
                     "review, final); " + "; ".join(f"{t.model} ({servers[i].model_path}) trains the "
                                                    f"{' and '.join(t.roles)}" for i, t in enumerate(teams))
                     + ". Each server is rewarded by its own grader."),
        gpus=facts.total_gpus or sum(s.gpus for s in servers), game=manifest.resolve_parameters({}),
        teams=teams, servers=servers, training=training,
        modes=[Mode(name="agent_roll", script="agent_roll.py", run_file="agent_run.py", servers=names,
                    rewarded={t.model: t.name for t in teams}, gpus={s.name: s.gpus for s in servers})],
        reward=RewardScheme(win=1.0, loss=0.0, description="; ".join(
            f"{server}: {grader} (0-2, normalised to [0, 1])" for server, grader in graders.items())),
        constraints=Constraints(no_chinese_in_code=True, random_ids_and_names=False, use_openai_sdk_tools=False),
        notes=notes,
    )
