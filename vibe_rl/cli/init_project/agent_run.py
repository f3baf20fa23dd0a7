"""One self-play game: both seats are played by the trainable model (server1), one episode per seat.

- Each seat has its own episode (its own base_url and key), so each seat's calls are trained with that
  seat's own reward: WIN for the winner, LOSS for the loser.
- Task ids are `<seed>-<seat>`: a GRPO group compares one seat from one starting position.
- A seat that never got to move has no calls to train on: its episode is aborted, not ended.
- An answer without a legal move loses the game for the seat that gave it (the game's lowest reward) and
  the episode ends normally: the model's mistake is a loss. A crash of this code aborts every episode.
- Every call is tagged `user="seat:seat_<n>"` for the trace audit of `vibe-rl run`.
"""

import json
import os
import re

from openai import OpenAI
from vibe_rl.swarm import SwarmClient, Task, WorkflowOutput

from game import MOVES, SEATS, TARGET, Game, new_game

# Team wiring: role -> the server (trainable) or static model its calls reach. `vibe-rl doctor` checks it.
TEAM_MODELS = {"seat": "server1"}
MAX_TOKENS = int(os.getenv("VIBE_RL_MAX_TOKENS", "64"))
WIN, LOSS = 1.0, 0.0
SYSTEM = (f"You play race to {TARGET}. Two players take turns adding 1, 2 or 3 to a running total. "
          f"Whoever makes the total exactly {TARGET} wins. Answer with the add tool.")
ADD_TOOL = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add 1, 2 or 3 to the running total.",
        "parameters": {"type": "object", "properties": {"n": {"type": "integer", "enum": list(MOVES)}},
                       "required": ["n"]},
    },
}


def parse_move(message) -> int | None:
    """The move in a reply: the add tool call first, then a bare 1, 2 or 3 in the text; None if neither."""
    for call in message.tool_calls or []:
        try:
            return int(json.loads(call.function.arguments)["n"])
        except (ValueError, KeyError, TypeError):
            return None
    found = re.search(r"\b([123])\b", message.content or "")
    return int(found.group(1)) if found else None


def ask_move(llm: OpenAI, model: str, game: Game, seat: int) -> int | None:
    prompt = (f"The total is {game.total}. Moves so far (seat, added): {game.history or 'none'}. "
              f"You are seat {seat}. Legal moves: {game.legal()}.")
    reply = llm.chat.completions.create(
        model=model, messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}],
        tools=[ADD_TOOL], max_tokens=MAX_TOKENS, user=f"seat:seat_{seat}")
    return parse_move(reply.choices[0].message)


def play_game(swarm: SwarmClient, seed: int) -> Game:
    """Play one game from `seed`; end (or abort) both seats' episodes. Returns the finished game."""
    game = new_game(seed)
    tasks = [Task(task_id=f"{seed}-{seat}", main_query=f"race to {TARGET} from {game.total}",
                  metadata={"seed": seed, "seat": seat}) for seat in range(SEATS)]
    episodes = [swarm.begin_episode(discard_episode_timeout=600) for _ in range(SEATS)]
    acted = [False] * SEATS
    try:
        llms = [OpenAI(base_url=creds.base_url, api_key=creds.api_key) for _, creds in episodes]
        while not game.over:
            seat = game.turn
            acted[seat] = True
            game.play(ask_move(llms[seat], episodes[seat][1].model, game, seat))
    except Exception:
        for uuid, _ in episodes:
            swarm.abort_episode(uuid)
        raise
    for seat, (uuid, _) in enumerate(episodes):
        if not acted[seat]:
            swarm.abort_episode(uuid)  # no calls to learn from
            continue
        reward = WIN if game.winner == seat else LOSS
        swarm.end_episode(tasks[seat], uuid, WorkflowOutput(reward=reward, metadata={
            "winner": game.winner, "forfeit": game.forfeit, "moves": len(game.history)}))
    return game
