"""One Who-is-Spy episode (agent_roll mode).

Every player is an OpenAI-SDK client of its team's model (TEAM_MODELS, routed by LLMRouter); each call is
tagged `user="<role>:<player_id>"`. A role wired to a static model calls it by name through this episode's
URL (the swarm server forwards it). Reward of the trainable side: WIN if the civilians win, else LOSS,
plus dense credit when game_engine.SHAPED_REWARD is on (see game_engine.shaped_reward).

Prompts put what every player saw first (rules, then the public record, which only grows) and the
player's own part (id, word, the question) last, so consecutive calls share a long token prefix that
the server's engine can reuse instead of recomputing.
"""

import os
import random
import re
from concurrent.futures import ThreadPoolExecutor

from vibe_rl.swarm import LLMRouter, OpenaiBaseUrlAndApiKey, RoleLLM, Task, WorkflowOutput

from game_engine import MAX_ROUNDS, NUM_PLAYERS, NUM_SPIES, Game, Player, new_game, side_reward

# Team wiring: role -> the server (trainable) or static model its calls reach. `vibe-rl doctor` checks it.
TEAM_MODELS = {"civilian": "server1", "spy": "qwen-max"}
MAX_TOKENS = int(os.getenv("VIBE_RL_MAX_TOKENS", "256"))
WIN, LOSS = 1.0, 0.0
# False: the describe calls reach the server as context (`context_only`: recorded, part of later prompts, never
# trained), so an update trains the ballots alone, the turns a ballot-based reward depends on.
TRAIN_DESCRIBE = True

FIRST = ("Ada Ben Cleo Dara Eli Faye Gus Hana Ivan Jade Kai Lena Milo Nora Omar Pia Quinn Ravi Sara Theo "
         "Uma Vik Wren Xia Yara Zane Alma Bruno Chen Dora Emil Fern Gale Hugo Iris Joel Kira Luca Maya Nils").split()
LAST = ("Abbott Brooks Castro Diaz Evans Fischer Garcia Haddad Ito Jensen Kowal Larsen Moreau Novak Okafor "
        "Park Quist Rossi Silva Tanaka Ueda Vargas Weber Xu Young Zhou Adler Berg Costa Dutta").split()
NAMES = [f"{first} {last}" for first in FIRST for last in LAST]  # 1200 names

SYSTEM = (
    "You play Who is Spy. Most players are civilians and share one word; the spies got a similar but "
    "different word. Nobody knows their own role. Each round everyone describes their word in one short "
    "sentence without saying it, then everyone votes out the player they think is a spy. Civilians win when "
    "every spy is out; spies win once they are as many as the civilians."
)
VOTE_TOOL = {
    "type": "function",
    "function": {
        "name": "vote",
        "description": "Vote to eliminate the player you think is a spy.",
        "parameters": {
            "type": "object",
            "properties": {"player_id": {"type": "string", "description": "Id of the player, e.g. player_7"}},
            "required": ["player_id"],
        },
    },
}


def public_record(game: Game) -> str:
    """What every player has seen, oldest first. It only grows, so it is a shared prompt prefix."""
    lines = ["Players: " + ", ".join(f"{p.pid} ({p.name})" for p in game.players)]
    out = dict(game.eliminated)  # round -> eliminated player
    for r in range(1, game.round + 1):
        said = [(pid, text) for when, pid, text in game.descriptions if when == r]
        lines += [f"round {r} {pid} ({game.player(pid).name}): {text}" for pid, text in said]
        if r < game.round:
            lines.append(f"round {r} vote: {out[r]} is out" if r in out else f"round {r} vote: nobody is out")
    return "\n".join(lines)


DESCRIBE = "Describe your word in one short sentence. Do not say the word."
VOTE = "Vote out one other player with the `vote` tool."


def messages_for(game: Game, player: Player, question: str) -> list[dict]:
    """The chat messages one player sees when asked `question` (DESCRIBE or VOTE; a vote lists its candidates)."""
    seats = ", ".join(f"{p.pid} ({p.name})" for p in game.alive())
    if question == VOTE:
        question += " Candidates: " + ", ".join(p.pid for p in game.alive() if p is not player) + "."
    prompt = (f"{public_record(game)}\n\nYou are {player.pid} ({player.name}); your word is '{player.word}'. "
              f"Round {game.round}.\nPlayers alive: {seats}\n{question}")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]


def tag(player: Player) -> str:
    """The `user=` of a player's calls: the server groups per-seat credit by it (train.advantage)."""
    return f"{player.role}:{player.pid}"


def ask(llm: RoleLLM, game: Game, player: Player, question: str, **kwargs):
    reply = llm.client.chat.completions.create(model=llm.model, messages=messages_for(game, player, question),
                                               max_tokens=MAX_TOKENS, user=tag(player), **kwargs)
    return reply.choices[0].message


def describe(game: Game, player: Player, llm: RoleLLM) -> str:
    message = ask(llm, game, player, DESCRIBE, extra_body=None if TRAIN_DESCRIBE else {"context_only": True})
    return (message.content or "").strip()[:300] or "(silence)"


def vote(game: Game, player: Player, llm: RoleLLM) -> str | None:
    """The vote is a tool call; plain text naming a player (id or name) is accepted as a fallback."""
    message = ask(llm, game, player, VOTE, tools=[VOTE_TOOL])
    calls = " ".join(call.function.arguments or "" for call in message.tool_calls or [])
    text = calls + " " + (message.content or "")  # the tool call's target comes first
    mentions = []
    for other in game.alive():
        found = re.search(rf"\b{other.pid}\b|{re.escape(other.name)}", text)
        if found and other.pid != player.pid:
            mentions.append((found.start(), other.pid))
    return min(mentions)[1] if mentions else None  # no valid target: an abstention


def play(task: Task, endpoints: dict[str, OpenaiBaseUrlAndApiKey], team_models: dict[str, str] = TEAM_MODELS,
         seed: int | None = None) -> Game:
    """Play one game; endpoints: server -> its episode. Ids, names and seats are shuffled per episode
    (pass `seed` to replay one)."""
    info = task.metadata
    game = new_game(info["civilian_word"], info["spy_word"], NAMES, random.Random(seed),
                    info.get("num_players", NUM_PLAYERS), info.get("num_spies", NUM_SPIES),
                    info.get("max_rounds", MAX_ROUNDS))
    llm_for = LLMRouter(team_models, endpoints).llm_for
    while game.winner() is None:
        for player in game.alive():  # in turn: each one sees the descriptions before theirs
            game.describe(player.pid, describe(game, player, llm_for(player.role)))
        alive = game.alive()  # every voter sees the same state, so the ballots are cast at once (in seat order)
        with ThreadPoolExecutor(len(alive)) as pool:
            ballots = pool.map(lambda p: vote(game, p, llm_for(p.role)), alive)
            game.vote({p.pid: target for p, target in zip(alive, ballots, strict=True)})
    return game


def summary(game: Game) -> dict:
    roles = {p.pid: p.role for p in game.players}
    return {"winner": game.winner(), "rounds": game.round - 1, "roles": roles, "eliminated": game.eliminated,
            "ballots": game.ballots}  # (round, voter, legal target or None for an abstention)


def reward(game: Game, role: str) -> float:
    return side_reward(game, role, WIN, LOSS)


def output(game: Game, role: str) -> WorkflowOutput:
    """The side's reward, and each of its seats' own (its ballots, the side's outcome) as `seat_rewards`,
    which `train.advantage: individual` trains on instead of the team reward. `win` (did this side win) is what
    an eval episode's win rate counts (eval/win_rate with its 95% interval in the server's metrics)."""
    seats = {tag(p): side_reward(game, role, WIN, LOSS, seats=[p.pid]) for p in game.players if p.role == role}
    return WorkflowOutput(reward=reward(game, role),
                          metadata={**summary(game), "win": game.winner() == role, "seat_rewards": seats})


def run_episode(task: Task, creds: OpenaiBaseUrlAndApiKey, seed: int | None = None) -> WorkflowOutput:
    game = play(task, {"server1": creds}, seed=seed)
    return output(game, "civilian")
