"""Offline planner rules of the who_is_spy family (loaded by file path; `build(facts, manifest) -> TaskSpec`):
fill the manifest's roles, servers and modes with the numbers the spec gives (players, spies, rounds, model
paths, ports, GPUs per mode and per server), and note every default. The vocabulary (team, training and
shaped-reward words) is the family's words.yaml (`WORDS`)."""

from __future__ import annotations

import re

from vibe_rl.errors import PlannerError
from vibe_rl.planner import common
from vibe_rl.planner.facts import Facts
from vibe_rl.planner.servers import segments
from vibe_rl.planner.text import NUM, Found
from vibe_rl.scaffold.families import Manifest, family_words
from vibe_rl.schema.job import StaticModel
from vibe_rl.schema.spec import Mode, Server, TaskSpec, Team

WORDS = family_words(__file__)
SIDES: dict[str, str] = WORDS["sides"]
SPY_WORDS, CIVILIAN_WORDS = SIDES["spies"], SIDES["civilians"]
# "同一个人" / "每个人" (the same / every person) are not player counts
PLAYERS = [rf"(?:^|(?<=\n))\s*(?:总人数|人数|玩家人数)\s*[:：=]\s*{NUM}", rf"(?<![同每哪某这那任])(?!一个人){NUM}\s*(?:名|个|位)?\s*(?:玩家|players?\b|ppl\b|people\b|人局|-player|人参与|个人)", rf"(?:共|一共|总共)\s*{NUM}\s*(?:人|名)",
           rf"(?:玩家|players?)\s*(?:数|人数|总数|数量|count|number)?\s*(?:[:：=]|设成|设为|设置为|改成|改为|为|有|is|are)?\s*{NUM}\s*(?:人|名)?(?![ \t]*(?:轮|rounds?|gpus?|卡))"]
SPIES = [rf"{NUM}\s*(?:名|个|位|人)?\s*(?:是)?\s*(?:卧底|间谍|spies\b|spy\b|undercover)",
         rf"(?:spies|卧底)\s*[(（]\s*{NUM}\s*(?:of them|人|个|名)?\s*[)）]",  # "the spies (2 of them)"
         rf"{NUM}\s*(?:of them\s+|of whom\s+)?(?:are|is|play|plays|being|(?:should|will|must)\s+be)\s+(?:the\s+|a\s+)?(?:spies|spy|undercover)",
         rf"(?:of which|of whom|among them|其中)\s*{NUM}\s*(?:名|个|位|人)?\s*(?:are\s+|is\s+|是)?(?:the\s+)?"
         rf"(?:spies|spy|undercover|卧底)",
         rf"(?:(?<!谁是)卧底|spies|spy(?=\s+(?:count|number)))\s*(?:数|人数|数量|count|number)?\s*(?:有|为|is|[:：=])?\s*{NUM}\s*(?:名|个|人)?(?![ \t]*(?:轮|rounds?|gpus?|卡))"]
CIVILIANS = [rf"{NUM}\s*(?:名|个|位)?\s*(?:{CIVILIAN_WORDS})\b"]
OTHER = {"spies": "civilians", "civilians": "spies"}


def _side_of(text: str, first: bool = False) -> str | None:
    """The team named last in `text` (with `first`: the one named first), or None."""
    hits = [(-m.start() if first else m.end(), side) for side, words in SIDES.items()
            for m in re.finditer(words, text, re.IGNORECASE)]
    return max(hits)[1] if hits else None


def _segment(facts: Facts, found: Found) -> tuple[int, int]:
    """The comma part of its clause (servers.segments) that holds `found`, else its own span."""
    parts = segments(facts.src, *facts.src.clause_of(found.start))
    return next(((a, b) for a, b in parts if a <= found.start < b), (found.start, found.end))


def counts(facts: Facts, notes: list[str], manifest: Manifest) -> dict:
    game: dict = {}
    players, spies, civilians = facts.find(*PLAYERS), facts.find(*SPIES), facts.find(*CIVILIANS)
    if players is None and spies is not None and civilians is not None:
        game["num_players"] = facts.use(spies) + facts.use(civilians)
    elif spies is None and players is not None and civilians is not None:
        game["num_spies"] = facts.use(players) - facts.use(civilians)
    elif None not in (players, spies, civilians) and civilians.value + spies.value == players.value:
        facts.use(civilians)  # consistent; left unmarked (so reported) when it is not
    for name, found, what in (("num_players", players, "player count"), ("num_spies", spies, "spy count"),
                              ("max_rounds", None, "round limit"), ("num_tasks", None, "mock dataset size")):
        common.game_parameter(facts, game, name, found, notes, manifest, what)
    said = facts.src.search(rf"(?:(?P<no>{WORDS['shaped_no']})\s*)?(?:{WORDS['shaped']})"
                            rf"(?:\s*(?:[:：=]|is|to)?\s*(?P<value>{WORDS['switch']})\b)?")
    if said:  # shaped_reward: "shaped reward on", "dense reward", "reward shaping: off", "稠密奖励", "不要奖励塑形"
        off = said.group("no") or (said.group("value") or "").lower() in ("off", "false", "no", "disabled", "关闭")
        game["shaped_reward"] = not off
        if game["shaped_reward"]:
            notes.append("Shaped reward on: win/loss plus dense credit (civilians: legal ballots and ballots on a "
                         "spy, weighted by hit_credit; spies: rounds survived).")
    game = manifest.resolve_parameters(game)
    if 2 * game["num_spies"] >= game["num_players"]:
        raise PlannerError(f"{game['num_spies']} spies among {game['num_players']} players: the spies must stay "
                           "fewer than the civilians, or they win before the first vote. Ask for more players or "
                           "fewer spies.")
    return game


def trained_side(text: str) -> str | None:
    """The side the spec says trains ("train the spies", "trained side: spies", "civilians are trainable",
    "训练卧底"), or None when it names neither or both."""
    before, after = rf"(?:{WORDS['trains_before']})\s*(?:[:：=]\s*)?(?:only\s+)?(?:the\s+)?", WORDS["trains_after"]
    sides = [side for side, words in SIDES.items() if re.search(rf"{before}(?:{words})", text, re.IGNORECASE)
             or re.search(rf"(?:{words})\s*(?:{WORDS['is']})?\s*(?:the\s+)?(?:{after})", text, re.IGNORECASE)]
    return sides[0] if len(sides) == 1 else None


def both_trained(text: str) -> bool:
    """Whether the spec says both teams train ("both sides train", "卧底和平民都要训练", "双方都训练"): that
    asks for agent_roll_adv, which `vibe-rl run` then starts (agent_roll trains one side only)."""
    text = re.sub(r"(?<![\w.])\.{0,2}/[\w./-]+", "/path", text)  # "都用 /models/q1.5b 训练": a path is one word
    teams, train = WORDS["both_teams"], WORDS["training"]
    both = "|".join([teams] + [rf"(?:{a})\s*(?:and|和|与|跟)\s*(?:the\s+)?(?:{b})" for a, b in (
        (SPY_WORDS, CIVILIAN_WORDS), (CIVILIAN_WORDS, SPY_WORDS))])
    return bool(re.search(rf"(?:{both})[^,.;，。；\n]{{0,12}}?(?:{WORDS['each']})[^,.;，。；\n]{{0,24}}?(?:{train})"
                          rf"|(?:{teams})\s*(?:都|各自?)?\s*(?:要|will|are|get)?\s*(?:{train})"
                          rf"|train\w*\s+both\s+(?:teams|sides)|(?:{train})\s*(?:双方|两边|两队)", text, re.IGNORECASE))


def path_sides(facts: Facts, notes: list[str]) -> str | None:
    """Servers numbered by path order alone ("the spies train /models/a, the civilians /models/b") follow the
    side each path is for (the team named last before it in its comma part, else the first after it), as
    agent_roll_adv seats them: the civilians' path, port and GPUs are server1's. Returns "civilians", or None
    when the spec numbers the servers or the paths do not name one side each."""
    srv = facts.servers
    if not (set(srv) == {0, 1} and all(s.implicit and s.path for s in srv.values())):
        return None
    sides = [_side_of(facts.text[max(a, p.start - 60):p.start]) or _side_of(facts.text[p.end:b], first=True)
             for p in (srv[0].path, srv[1].path) for a, b in [_segment(facts, p)]]
    if set(sides) != set(SIDES):
        return None
    if sides[0] == "spies":
        srv[0], srv[1] = srv[1], srv[0]
        notes.append(f"The civilians' model ({srv[0].path.value}) is server1's and the spies' ({srv[1].path.value}) "
                     "server2's, with their ports and GPUs, as agent_roll_adv seats them (civilians on server1).")
    return "civilians"


def opponent(facts: Facts, notes: list[str], trains: str | None = None) -> tuple[str, StaticModel]:
    """(the side that plays a static model in agent_roll, that model). A side the spec says trains decides,
    else `trains` (the side whose model server1 holds, when each team has its own path); else a static model
    belongs to the team named just before it (noted). Of several, the spies' last one is used, else the first."""
    trained = trained_side(facts.text) or trains
    sides = [(OTHER[trained] if trained else _side_of(facts.text[max(0, p - 60):p]) or "spies", model)
             for p, model in facts.static_models]
    if sides:
        side, model = next((s for s in reversed(sides) if s[0] == "spies"), sides[0])
        said = any(re.search(SIDES[OTHER[side]], c, re.I) and re.search(rf"{WORDS['train']}|learn|/\w", c, re.I)
                   for c in (facts.text[a:b] for a, b in facts.src.clauses()))
        if not trained and not said:  # the side is read from where the model is named alone: say so
            notes.append(f"No team is said to train: the {OTHER[side]} train, as {model.name} is named for the "
                         f"{side}. If that is wrong, say which team trains ('train the {side}').")
        return side, common.static_endpoint(facts, model)
    said = re.search(rf"(?:{SPY_WORDS})[^,.;，。；\n]{{0,20}}(?:{WORDS['train']})", facts.text, re.IGNORECASE)
    if said and re.search(CIVILIAN_WORDS, facts.text[max(0, said.start() - 12):said.start()], re.IGNORECASE):
        said = None  # "平民和卧底各自...训练": both sides train (adversarial), not the spies alone
    side = OTHER[trained] if trained else ("civilians" if said else "spies")
    notes.append(f"No opponent model named: the {side} play 'opponent' in agent_roll, a frozen local copy "
                 "of the trainable model.")
    return side, StaticModel(name="opponent")


def server_paths(facts: Facts, notes: list[str]) -> tuple[str, str]:
    first = facts.server_path(0) or (facts.model_paths[0] if facts.model_paths else None)
    second = facts.server_path(1)
    if second is None:  # a path in a clause (or, after it, the same segment) about the spies is server 2's
        for found in facts.model_paths:
            near = (facts.text[facts.src.clause_of(found.start)[0]:found.start],
                    facts.text[found.end:_segment(facts, found)[1]])
            if found is not first and any(re.search(SPY_WORDS, t, re.IGNORECASE) for t in near):
                second = found
    path1 = facts.use(first) if first is not None else common.no_model_path(facts, notes)
    path2 = facts.use(second) or path1
    if second is None:
        notes.append(f"No model path for server2: it starts from server1's model ({path1}).")
    return path1, path2


def gpus(facts: Facts, notes: list[str], asked: bool) -> tuple[int, list[int], int, bool]:
    """(agent_roll GPUs, agent_roll_adv GPUs of server1 and server2, total, whether the latter are filled in).
    A count said of one server ("server 2 uses 2 GPUs") holds in every mode unless the mode has its own; 0 is
    a count (CPU). With no total, agent_roll_adv's ("adversarial: 8 GPUs") is the node's, else agent_roll's
    when the spec does not ask for agent_roll_adv (`asked`): that mode then splits it."""
    g, srv = facts.gpus, facts.servers
    total, per_server = facts.use(g.total), facts.use(g.per_server)
    own = [facts.use(srv[i].gpus) if i in srv else None for i in (0, 1)]
    roll = common.first_given(facts.use(g.mode_per_server.get("agent_roll")), own[0], per_server)
    if roll is None:
        roll = 1 if total is None else total
        notes.append(f"agent_roll: no GPU count for its server: using {roll}"
                     + (" (the total)." if total is not None else "."))
    each = facts.use(g.mode_per_server.get("agent_roll_adv"))
    adv = [common.first_given(each, mine, per_server) for mine in own]
    if total is None and adv[1] is None and not asked and roll > 1 and "agent_roll_adv" not in g.mode_total:
        adv, total = [roll // 2, roll - roll // 2], roll
        notes.append(f"No total GPU count given: the node has agent_roll's {roll}; agent_roll_adv (not asked for) "
                     f"splits them: {adv[0]} + {adv[1]}.")
    if filled := None in adv:
        split = common.first_given(facts.use(g.mode_total.get("agent_roll_adv")), total)
        fill = 1 if split in (None, 1) else split // 2
        adv = [a if a is not None else fill for a in adv]
        notes.append(f"agent_roll_adv: no GPUs per server given: using {adv[0]} + {adv[1]}"
                     + (f" (half of {split} each)." if split and split > 1 else "."))
    if total is None and (total := facts.use(g.mode_total.get("agent_roll_adv"))) is None:
        total = max(roll, sum(adv))
        notes.append(f"No total GPU count given: the node needs {total}.")
    return roll, adv, total, filled


def build(facts: Facts, manifest: Manifest) -> TaskSpec:
    notes: list[str] = list(facts.notes)
    game = counts(facts, notes, manifest)
    static_side, static_model = opponent(facts, notes, path_sides(facts, notes))
    learners = OTHER[static_side]
    path1, path2 = server_paths(facts, notes)
    both = both_trained(facts.text)
    roll_gpus, adv_gpus, total, filled = gpus(facts, notes, both or "agent_roll_adv" in facts.modes_named)
    loose, own = list(facts.ports), [facts.servers.get(i) for i in (0, 1)]
    port1, port2 = [facts.use(s.port if s and s.port else (loose.pop(0) if loose else None)) or 10086 + i
                    for i, s in enumerate(own)]
    if not (facts.ports or any(s.port for s in facts.servers.values())):
        notes.append("No ports given: server1 on 10086, server2 on 10087.")
    modes = common.planned_modes(facts, [
        Mode(name="agent_roll", script="agent_roll.py", run_file="agent_run.py", servers=["server1"],
             rewarded={"server1": learners}, gpus={"server1": roll_gpus}),
        Mode(name="agent_roll_adv", script="agent_roll_adv.py", run_file="agent_run_adv.py",
             servers=["server1", "server2"], teams={"civilians": "server1", "spies": "server2"},
             rewarded={"server1": "civilians", "server2": "spies"}, gpus={"server1": adv_gpus[0], "server2": adv_gpus[1]}),
    ], notes, asked=("agent_roll_adv",) if both else ())
    named = "agent_roll_adv" in facts.modes_named
    if filled and sum(adv_gpus) > total and len(modes) > 1 and not named and not both:
        modes = [m for m in modes if m.name != "agent_roll_adv"]
        notes.append(f"agent_roll_adv left out: it runs two servers on separate GPUs and the spec gives {total}. "
                     "Give 2 or more GPUs to plan it too.")
    names = {m.name for m in modes}
    statics = [static_model] if "agent_roll" in names else []
    adv = "against each other on two servers (agent_roll_adv)."
    model = {"civilians": "server1", "spies": "server2"}
    what = f"Train both teams of Who is Spy ({path1}) {adv}"
    if statics:
        common.static_note(facts, static_model, notes)
        model = {learners: "server1", static_side: static_model.name}
        what = f"Train the {learners} of Who is Spy ({path1}) against {static_model.name} (agent_roll)" + (
            f", and both teams {adv}" if "agent_roll_adv" in names else ".")
    gpus1 = roll_gpus if statics else adv_gpus[0]
    servers = [Server(name="server1", port=port1, model_path=path1, gpus=gpus1,
                      config="config.yaml", url_env="VIBE_RL_SWARM_URL", static_models=[m.name for m in statics])]
    if "agent_roll_adv" in names:
        servers.append(Server(name="server2", port=port2, model_path=path2, gpus=adv_gpus[1],
                              config="config_server2.yaml", url_env="VIBE_RL_SWARM_URL_2"))
    elif path2 != path1:
        notes.append(f"A second model path ({path2}) is given but agent_roll_adv is not planned: it is unused.")
    return TaskSpec(
        family=manifest.name, name=manifest.name, short_name=common.short_name(facts, manifest, notes),
        title="Who is Spy: GRPO self-play", description=what, gpus=total, game=game, servers=servers,
        teams=[Team(name="civilians", roles=["civilian"], model=model["civilians"]),
               Team(name="spies", roles=["spy"], model=model["spies"])], static_models=statics, modes=modes,
        training=common.training(facts, notes, batch_size=16, grpo_n=4), reward=common.reward(facts, notes),
        constraints=common.constraints(facts, notes, random_ids=True), notes=notes,
    )
