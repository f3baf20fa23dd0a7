"""One Werewolves episode (agent_roll mode).

Every player is an OpenAI-SDK client of its role's model (TEAM_MODELS; `vibe-rl doctor` checks it) and every
call is tagged `user="<role>:<player_id>"`. Roles wired to the trainable server server1 use their team's
episode; roles wired to a static model call it by name through an episode URL (the server forwards it and
keeps the call as context only).

The werewolves and the seer share one model but sit on opposite sides, so a game fills one episode per
trainable team (EPISODE_ROLES): each episode holds only that team's calls and earns WIN when the team's
side wins, else LOSS (a draw pays LOSS to both).

`vibe-rl eval` plays checkpoints against each other through play(task, {server: episode}, team_models) and
output(played, role): one episode per game, every role on a frozen checkpoint.

Prompts put what every player saw first (rules, then the public events, whose window moves in blocks)
and the player's own part (living players, private notes, the question) last, so consecutive calls share
a long token prefix that the server's engine can reuse instead of recomputing.
"""

import json
import os
import random
from typing import NamedTuple

from openai import BadRequestError
from vibe_rl.swarm import LLMRouter, OpenaiBaseUrlAndApiKey, RoleLLM, Task, WorkflowOutput

from game_engine import HUNTER, SEER, SKIP, WEREWOLF, WITCH, Game, Player, side_of

# Role -> the server (trainable) or static model its calls reach.
TEAM_MODELS = {
    "werewolf": "server1",
    "seer": "server1",
    "witch": "Qwen3-235B-A22B",
    "hunter": "Qwen3-235B-A22B",
    "villager": "Qwen3-235B-A22B",
}
TRAINABLE = "server1"
# Trainable team -> its roles; one episode per team and game.
EPISODE_ROLES = {
    "werewolves": ["werewolf"],
    "seer": ["seer"],
}
MAX_TOKENS = int(os.getenv("VIBE_RL_MAX_TOKENS", "256"))
WIN, LOSS = 1.0, 0.0
LOG_LINES = 30  # recent public events shown in a prompt

FIRST = ("Ada Ben Cleo Dara Eli Faye Gus Hana Ivan Jade Kai Lena Milo Nora Omar Pia Quinn Ravi Sara Theo "
         "Uma Vik Wren Xia Yara Zane Alma Bruno Chen Dora Emil Fern Gale Hugo Iris Joel Kira Luca Maya Nils").split()
LAST = ("Abbott Brooks Castro Diaz Evans Fischer Garcia Haddad Ito Jensen Kowal Larsen Moreau Novak Okafor "
        "Park Quist Rossi Silva Tanaka Ueda Vargas Weber Xu Young Zhou Adler Berg Costa Dutta").split()
NAMES = [f"{first} {last}" for first in FIRST for last in LAST]  # 1200 names
# Role -> seats dealt every game (the plan's game.roles): edit it to change the roles or the player count;
# the seats, the deal and the prompt follow it.
ROLES = {
    "werewolf": 3,
    "seer": 1,
    "witch": 1,
    "hunter": 1,
    "villager": 3,
}
SEATS = sum(ROLES.values())
_SEATED = [f"{n} {role if n == 1 else {WEREWOLF: 'werewolves', WITCH: 'witches'}.get(role, role + 's')}"
           for role, n in ROLES.items() if n]
SEAT_TABLE = ", ".join(_SEATED[:-1]) + " and " + _SEATED[-1] if len(_SEATED) > 1 else "".join(_SEATED)
_NIGHT = ["the werewolves attack a player"] + [power for role, power in (
    (SEER, "the seer learns whether one player is a werewolf"),
    (WITCH, "the witch may save the victim or poison a player (each potion once per game)")) if ROLES.get(role)]
NIGHT = (", ".join(_NIGHT[:-1]) + (", and " if len(_NIGHT) > 2 else " and ") + _NIGHT[-1]) if _NIGHT[1:] else _NIGHT[0]

SYSTEM = (
    f"You play Werewolves with {SEATS} players: {SEAT_TABLE}. Each night "
    + NIGHT + ". " + ("A hunter who dies may shoot a player, unless poisoned. " if ROLES.get(HUNTER) else "")
    + "Each day everyone speaks, then all vote one player out; a tie eliminates nobody. The village "
    "wins when every werewolf is dead; the werewolves win once they are at least as many as the others."
)
ASK = {
    "wolf_kill": "Night: choose the player the werewolves attack.",
    "seer_check": "Night: choose a player to check; you will learn whether they are a werewolf.",
    "witch_save": "Night: your notes name the werewolves' victim. Use your save potion on them?",
    "witch_poison": "Night: poison a player, or skip to keep your poison potion.",
    "hunter_shoot": "You are dead. Shoot a living player, or skip.",
    "day_vote": "Day vote: choose the player to eliminate.",
}
CHOOSE_TOOL = {
    "type": "function",
    "function": {
        "name": "choose",
        "description": "Make your choice for this phase of the game.",
        "parameters": {
            "type": "object",
            "properties": {"choice": {"type": "string", "description": "One of the listed options, e.g. player_7"}},
            "required": ["choice"],
        },
    },
}


def view(game: Game, me: Player, lines: int = LOG_LINES) -> str:
    """At most `lines` recent public events (the window's start moves in blocks of lines/2, so the shared
    prefix stays put between blocks), then what only `me` sees."""
    log, block = game.public_log, max(1, lines // 2)
    start = 0 if len(log) <= lines else -(-(len(log) - lines) // block) * block
    events = "\n".join(log[start:] if lines else []) or "(nothing shown)"
    alive = ", ".join(f"{p.pid} ({p.name})" for p in game.living())
    notes = "\n".join(game.private_log.get(me.pid, []))
    return f"Public events:\n{events}\n\nDay {game.day}. Living players: {alive}\nYour private notes:\n{notes}"


class LLMPlayers:
    """game_engine's Decider. An answer naming no legal option is the player's own mistake when its role trains
    (in TEAM_MODELS, whichever model plays it now): the engine counts it as an abstention (a lost vote or action,
    in `invalid_actions`), never a move chosen for it, since a fallback would make unparseable answers play like
    legal ones and flatten the GRPO groups. A static role's such answer falls back to 'skip' where allowed, else
    to a random legal option, so the game moves on (static roles are not trained; counted in `fallbacks`)."""

    def __init__(self, llms: dict[str, RoleLLM], rng: random.Random):
        self.llms, self.rng, self.fallbacks = llms, rng, 0

    def ask(self, game: Game, player: Player, task: str, **kwargs):
        """One call for `player`; a prompt over the model's context is retried with fewer public events."""
        llm = self.llms[player.role]
        lines = LOG_LINES
        while True:
            messages = [{"role": "system", "content": SYSTEM},
                        {"role": "user", "content": f"{view(game, player, lines)}\n{task}"}]
            try:
                reply = llm.client.chat.completions.create(model=llm.model, messages=messages, max_tokens=MAX_TOKENS,
                                                           user=f"{player.role}:{player.pid}", **kwargs)
                return reply.choices[0].message
            except BadRequestError as exc:
                if lines == 0 or "context" not in str(exc).lower():
                    raise
                lines //= 2

    def speak(self, game: Game, player: Player) -> str:
        task = "Day discussion: say one or two sentences to the other players."
        return (self.ask(game, player, task).content or "").strip() or "(silence)"

    def choose(self, game: Game, player: Player, action: str, options: list[str]) -> str:
        task = f"{ASK[action]}\nOptions: {', '.join(options)}. Answer with the `choose` tool."
        message = self.ask(game, player, task, tools=[CHOOSE_TOOL])
        text = message.content or ""
        for call in message.tool_calls or []:
            try:
                text = str(json.loads(call.function.arguments or "{}").get("choice", "")) + " " + text
            except (json.JSONDecodeError, AttributeError):
                text = (call.function.arguments or "") + " " + text
        names = {p.pid: p.name for p in game.players}
        for option in sorted(options, key=len, reverse=True):  # player_12 before player_1
            if option in text or (option in names and names[option] in text):
                return option
        if TEAM_MODELS[player.role] == TRAINABLE:
            return ""  # not an option: the engine's abstention, counted in game.invalid_actions
        self.fallbacks += 1
        return SKIP if SKIP in options else self.rng.choice(options)


def episode_of(role: str) -> str:
    """The episode a role's calls go through: its own team's, else (static roles) that of a trainable team on
    its side, which keeps that episode busy while e.g. the seer is silent or dead; else the first."""
    own = [team for team, roles in EPISODE_ROLES.items() if role in roles]
    side = [team for team, roles in EPISODE_ROLES.items() if (roles[0] == WEREWOLF) == (role == WEREWOLF)]
    return (own or side or list(EPISODE_ROLES))[0]


class Played(NamedTuple):
    """One finished game."""

    game: Game
    fallbacks: int  # static roles' answers replaced by a legal option (LLMPlayers)


def play(task: Task, endpoints: dict[str, OpenaiBaseUrlAndApiKey], team_models: dict[str, str] = TEAM_MODELS,
         seed: int | None = None) -> Played:
    """Play one game. The task's seed fixes the deal; ids and names are drawn per episode (`seed` replays one).
    `endpoints`: trainable team -> its episode (EPISODE_ROLES; each role calls through episode_of's), or one
    episode that takes every call (`vibe-rl eval`'s); `team_models` rewires the roles (e.g. two checkpoints)."""
    rng = random.Random(seed)
    ids = [f"player_{n}" for n in rng.sample(range(1, 100), SEATS)]
    info = task.metadata
    game = Game.deal(ids, rng.sample(NAMES, SEATS), seed=int(info.get("seed", task.task_id)), roles=ROLES,
                     win_rule=info.get("win_rule", "parity"), max_days=info.get("max_days", 12))
    per_team = endpoints.keys() == EPISODE_ROLES.keys()
    router = LLMRouter(team_models, endpoints, trainable={TRAINABLE}, episode_for=episode_of if per_team else None)
    players = LLMPlayers({role: router.llm_for(role) for role in team_models}, rng)
    game.play(players)
    return Played(game, players.fallbacks)


def output(played: Played, role: str) -> WorkflowOutput:
    """`role`'s side's reward: WIN when that side won, else LOSS (a draw, the day limit's end, is nobody's win);
    `win` (that side won) is what an eval episode's win rate counts."""
    game, fallbacks = played
    won = game.winner == side_of(role)
    return WorkflowOutput(reward=WIN if won else LOSS, metadata={
        "winner": game.winner, "days": game.day, "roles": {p.pid: p.role for p in game.players},
        "side": side_of(role), "fallbacks": fallbacks, "invalid_actions": game.invalid_actions, "win": won})


def run_episode(task: Task, endpoints: dict[str, OpenaiBaseUrlAndApiKey],
                seed: int | None = None) -> dict[str, WorkflowOutput]:
    """endpoints: trainable team -> its episode credentials. Returns team -> its episode's output."""
    played = play(task, endpoints, seed=seed)
    return {team: output(played, roles[0]) for team, roles in EPISODE_ROLES.items()}
