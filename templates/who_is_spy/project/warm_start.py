"""Optional warm start: a few supervised steps that teach a small model the game's answer format.

A random model (the CPU demo's tiny one) never writes a player id, so it never casts a legal vote and
GRPO gets no signal. This script plays random games with the real prompts (agent_run.messages_for)
and trains on answers in the right format: one fixed short sentence for DESCRIBE (a tiny model learns
it in a few steps, and a description it cannot get wrong leaves the votes' prompts as in training), a
plain player id for VOTE. The vote targets are random living players, so it teaches the format, not
who the spy is; keep it short and let RL do the rest.

    python warm_start.py --model tiny --steps 20 --out experiments/warm_start
    vibe-rl run . --set model.path=experiments/warm_start/model

It needs torch (the Python of `vibe-rl swarm start`); it prints one JSON line with the losses and
the share of legal votes the model samples after training.
"""

import argparse
import json
import random
import re
import time
from pathlib import Path

from vibe_rl.engine import SamplingParams, load_engine
from vibe_rl.schema import EngineConfig, TrainConfig
from vibe_rl.swarm.server.chat import render_prompt

from agent_run import DESCRIBE, NAMES, VOTE, VOTE_TOOL, messages_for
from game_engine import Game, new_game

HERE = Path(__file__).resolve().parent
SENTENCES = ["I like it."]  # one short description: the warm start teaches the answer format, not what to say
DESCRIBE_SHARE = 0.25  # default share of description examples; the rest are votes, the harder format


def random_state(games: list[dict], rng: random.Random) -> Game:
    """A game a few random rounds in: every description and vote random but legal."""
    info = rng.choice(games)
    game = new_game(info["civilian_word"], info["spy_word"], NAMES, rng, info["num_players"], info["num_spies"],
                    info["max_rounds"])
    for _ in range(rng.randrange(3)):
        if game.winner() is not None:
            break
        for player in game.alive():
            game.describe(player.pid, rng.choice(SENTENCES))
        game.vote({p.pid: rng.choice([o.pid for o in game.alive() if o is not p]) for p in game.alive()})
    return game if game.winner() is None else random_state(games, rng)


def example(games: list[dict], rng: random.Random, describe_share: float = DESCRIBE_SHARE) -> tuple[dict, Game, str]:
    """One chat example: (conversation, the game, the voter's id or '' for a description)."""
    game = random_state(games, rng)
    player = rng.choice(game.alive())
    if rng.random() < describe_share:
        return {"messages": messages_for(game, player, DESCRIBE) + [
            {"role": "assistant", "content": rng.choice(SENTENCES)}]}, game, ""
    target = rng.choice([p.pid for p in game.alive() if p is not player])
    return {"messages": messages_for(game, player, VOTE) + [{"role": "assistant", "content": target}],
            "tools": [VOTE_TOOL]}, game, player.pid


def legal_vote_share(engine, games: list[dict], rng: random.Random, n: int, max_tokens: int) -> float:
    """Share of sampled VOTE answers (temperature 1) that name a living player other than the voter."""
    asked = []  # (the game, the voter, the pending answer): submitted together, they run as one batch
    for _ in range(n):
        convo, game, voter = example(games, rng, describe_share=0.0)
        ids = render_prompt(engine.tokenizer, convo["messages"][:-1], convo["tools"])  # as the server renders it
        asked.append((game, voter, engine.submit(ids, SamplingParams(max_tokens=max_tokens))))
    legal = 0
    for game, voter, answer in asked:
        text = engine.tokenizer.decode(answer.result().token_ids)
        legal += any(re.search(rf"\b{p.pid}\b", text) for p in game.alive() if p.pid != voter)
    return legal / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="Model to start from: 'tiny' or an HF model directory")
    parser.add_argument("--steps", type=int, default=20, help="Supervised steps (0: only save the model)")
    parser.add_argument("--batch", type=int, default=8, help="Examples per step")
    parser.add_argument("--lr", type=float, default=2e-2, help="Learning rate")
    parser.add_argument("--seed", type=int, default=0, help="Seed of the examples and of the model's sampling")
    parser.add_argument("--describe-share", type=float, default=DESCRIBE_SHARE, help="Share of description examples")
    parser.add_argument("--eval", type=int, default=40, help="Votes sampled to measure the legal-vote share")
    parser.add_argument("--out", default="experiments/warm_start", help="Output: <out>/model is an HF directory")
    args = parser.parse_args()

    games = json.loads((HERE / "mock_game_dataset.json").read_text())
    rng = random.Random(args.seed)
    engine = load_engine(EngineConfig(path=args.model, device="cpu", max_model_len=4096, seed=args.seed),
                         TrainConfig(lr=args.lr, micro_batch_size=8), trainable=True)
    try:
        started = time.monotonic()
        losses = []
        for _ in range(args.steps):
            batch = [example(games, rng, args.describe_share)[0] for _ in range(args.batch)]
            losses.append(round(engine.sft(batch)["sft_loss"], 4))
        sft_s = time.monotonic() - started
        share = legal_vote_share(engine, games, rng, args.eval, max_tokens=16) if args.eval else None
        saved = engine.save(Path(args.out))
    finally:
        engine.close()
    print(json.dumps({"model": str(Path(saved) / "model"), "steps": args.steps, "sft_loss": losses,
                      "legal_vote_share": share, "sft_s": round(sft_s, 1),
                      "total_s": round(time.monotonic() - started, 1)}))


if __name__ == "__main__":
    main()
