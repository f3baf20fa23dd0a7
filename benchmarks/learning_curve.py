"""Does a real model learn? Held-out eval reward at step 0 and every K updates; prints ONE JSON object.

For each seed: a Who-is-Spy project rendered from the seed spec (offline planner) with a preset's game and
reward -> a real `vibe-rl swarm start --model MODEL` -> this script as the client, playing the project's own
`agent_run.run_episode` through the official openai SDK:

1. eval: the last `--eval-episodes` tasks of the mock dataset (never trained on), each played once as an
   `eval=True` episode with a fixed game seed, so every eval round plays the same games;
2. train: training episodes (grpo_n per task, `--in-flight` at once) until the server's global_step reaches
   the next multiple of `--eval-every`; then the in-flight episodes finish and the next eval round runs.

Per eval round: the reward's mean and 95% interval over episodes (mean +- 1.96 sd / sqrt(n)), the civilians'
legal-ballot share, the civilians' win rate (95% Wilson interval), the share of vote calls answered with a
`<tool_call>` that parses, and the weight versions that served the round. Presets:

- `cpu-demo`: the CPU demo's game and reward (scripts/demo_settings.py): 4 players, one round, reward 0.5 x
  the share of the civilians' ballots that are legal votes;
- `gpu`: the seed spec's game cut to 4 players and 2 rounds, win 1 / loss 0 plus dense credit, tools on, the
  spy on a frozen copy of the initial model.

`--spy-pool K`: in training games the spy plays `past-self`, a static model with `source:
checkpoint:pool:last-K` (one of the K newest checkpoints, drawn per game; checkpoints every `--snapshot-every`
updates; the initial model until the first), while eval games keep the frozen initial model as the spy: the
civilians learn against their own past, and are measured against a fixed opponent.

    python benchmarks/learning_curve.py --model smollm2 --device cpu --steps 10 --eval-every 5 --seeds 0 1 2 3 4
    python benchmarks/learning_curve.py --model smollm2 --device cuda --preset gpu --steps 200 --eval-every 25
    python benchmarks/learning_curve.py --model smollm2 --device cuda --preset gpu --steps 200 --eval-every 20 \
        --spy-pool 5 --snapshot-every 10
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SEED_SPEC = REPO / "templates" / "who_is_spy" / "examples" / "seed_prompt.zh.md"
sys.path.insert(0, str(REPO / "scripts"))
from demo_settings import DEMO_REWARD, SMOL_GAME, smol_sets  # noqa: E402  (the demo's numbers, one source)

VIBE_RL = [sys.executable, "-c", "from vibe_rl.cli import main; main()"]
VOTE_ASK = "with the `vote` tool"
PRESETS = {
    "cpu-demo": {"game": SMOL_GAME, "reward": DEMO_REWARD, "sets": smol_sets},  # the dtype this CPU runs fastest
    # The seed spec's game on a GPU, made short enough for 200+ updates in minutes: 4 players (1 spy, a frozen copy
    # of the initial model), one round, win 1 / loss 0 plus the family's dense credit (legal ballots, ballots on
    # the spy), each civilian credited with its own ballots (train.advantage: individual, the template's
    # seat_rewards); LoRA on bf16 weights (a pure-bf16 full fine-tune rounds small updates away).
    "gpu": {"game": {"shaped_reward": True, "num_players": 4, "max_rounds": 1, "hit_credit": 1.0}, "reward": {},
            "sets": ["train.batch_size=4", "train.grpo_n=4", "rollout.max_tokens=48", "train.save_freq=0",
                     "model.lora.rank=32", "model.lora.alpha=64", "train.lr=0.0002", "model.max_model_len=2048",
                     "train.advantage=individual"]},
}


PAST_SELF = "past-self"


def render(project: Path, preset: dict, spy_pool: int) -> None:
    plan = subprocess.run([*VIBE_RL, "new", "--spec-file", str(SEED_SPEC), "--planner", "offline", "--dry-run",
                           "--json"], capture_output=True, text=True, check=True).stdout
    spec = json.JSONDecoder().raw_decode(plan[plan.index("{"):])[0]
    spec["game"].update(preset["game"])
    spec["reward"].update(preset["reward"])
    (project.parent / "plan.json").write_text(json.dumps(spec))
    subprocess.run([*VIBE_RL, "new", "--plan", str(project.parent / "plan.json"), "--out", str(project), "--force"],
                   capture_output=True, text=True, check=True)
    if spy_pool:  # the training games' spy: a past checkpoint of the civilians' own model
        import yaml

        config = yaml.safe_load((project / "config.yaml").read_text())
        config.setdefault("static_models", []).append({"name": PAST_SELF, "source": f"checkpoint:pool:last-{spy_pool}",
                                                        "snapshot_cache": spy_pool})  # all K stay loaded
        (project / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def interval(values: list[float]) -> dict:
    n = len(values)
    mean = sum(values) / n if n else float("nan")
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    half = 1.96 * sd / math.sqrt(n) if n else float("nan")
    return {"mean": round(mean, 4), "ci95": [round(mean - half, 4), round(mean + half, 4)], "n": n}


def win_interval(flags: list[float]) -> dict:
    """A win rate with its 95% Wilson interval (as the server's eval/win_rate): stays in [0, 1] for few games."""
    from vibe_rl.swarm.observe.winrate import wilson

    wins, n = int(sum(flags)), len(flags)
    lo, hi = wilson(wins, n)
    return {"mean": round(wins / n, 4), "ci95": [round(lo, 4), round(hi, 4)], "n": n, "wins": wins}


def vote_parse_share(db: Path, uuids: list[str]) -> tuple[float | None, int]:
    """Share of the trainable model's vote calls (in these episodes) whose answer holds a parsable tool call."""
    from vibe_rl.swarm.server.chat import parse_tool_calls

    with sqlite3.connect(db) as con:
        rows = con.execute(f"SELECT messages_json, response_text FROM turns WHERE static=0 AND episode_uuid IN "
                           f"({','.join('?' * len(uuids))})", uuids).fetchall()
    votes = [text for messages, text in rows if VOTE_ASK in (json.loads(messages)[-1].get("content") or "")]
    if not votes:
        return None, 0
    return round(sum(bool(parse_tool_calls(t or "")[1]) for t in votes) / len(votes), 4), len(votes)


class Client:
    """This benchmark's client: eval rounds and training phases against one server."""

    def __init__(self, project: Path, url: str, in_flight: int, seed: int, spy_pool: int):
        sys.path.insert(0, str(project))
        os.chdir(project)
        from agent_roll import DISCARD_EPISODE_TIMEOUT, load_tasks
        from agent_run import TEAM_MODELS, output, play, run_episode

        from vibe_rl.swarm import SwarmClient, TrainJob, schedule

        self.run_episode, self.timeout, self.schedule = run_episode, DISCARD_EPISODE_TIMEOUT, schedule
        self.swarm = SwarmClient(url)
        self.swarm.auto_sync_train_config_and_start_engine(TrainJob.from_yaml(project / "config.yaml"))
        self.tasks = load_tasks()
        self.in_flight, self.seed = in_flight, seed
        self.game, self.output = play, output
        self.train_team = {**TEAM_MODELS, "spy": PAST_SELF} if spy_pool else None
        self.played = 0
        self.train_wins: list[float] = []  # civilian wins in the training games since the last eval round

    def play(self, task, is_eval: bool, game_seed: int | None) -> tuple[str, float, dict]:
        with self.swarm.episode(task, timeout=self.timeout, eval=is_eval) as ep:
            if self.train_team and not is_eval:
                out = self.output(self.game(task, {"server1": ep.credentials}, self.train_team), "civilian")
            else:
                out = self.run_episode(task, ep.credentials, seed=game_seed)
            ep.end(out.reward, out.metadata)
            return ep.uuid, out.reward, out.metadata

    def eval_round(self, held_out: list) -> list[tuple[str, float, dict]]:
        with ThreadPoolExecutor(self.in_flight) as pool:
            return list(pool.map(lambda t: self.play(t[1], True, 10_000 + t[0]), enumerate(held_out)))

    def train_until(self, step: int, train_tasks: list) -> None:
        """Whole updates, one at a time: the episodes of one update (batch_size groups of grpo_n), then the wait
        for that update. Nothing is in flight when this returns, so the next eval round sees one version."""
        job = self.swarm.job.train
        items = self.schedule(train_tasks[self.played // job.grpo_n % len(train_tasks):] + train_tasks, job.grpo_n)
        while (now := self.swarm.status().global_step) < step:
            round_ = [next(items)[0] for _ in range(job.batch_size * job.grpo_n)]
            self.played += len(round_)
            with ThreadPoolExecutor(self.in_flight) as pool:
                played = list(pool.map(lambda t: self.play(t, False, None), round_))
            self.train_wins += [float(meta.get("winner") == "civilian") for _, _, meta in played]
            deadline = time.time() + 900
            while self.swarm.status().global_step <= now:
                if time.time() > deadline:
                    raise RuntimeError(f"no weight update within 900 s after step {now}: see the server log")
                time.sleep(0.2)


def one_seed(project: Path, work: Path, args: argparse.Namespace, preset: dict, seed: int) -> dict:
    from vibe_rl.swarm.launch import free_port, spawn, stop, wait_healthy

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    sets = [*preset["sets"], *args.sets, f"model.seed={seed}", f"model.device={args.device}"]
    if args.spy_pool:
        sets.append(f"train.save_freq={args.snapshot_every}")
    env = {k: v for k, v in os.environ.items() if k != "DASHSCOPE_API_KEY"}  # qwen-max: a frozen local copy
    env["VIBE_RL_MAX_TOKENS"] = str(args.max_tokens)
    if args.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
        env.setdefault("MALLOC_ARENA_MAX", "2")  # as `vibe-rl run` starts a CPU server (see autopilot/plan.py)
    os.environ.update(VIBE_RL_MAX_TOKENS=str(args.max_tokens))  # agent_run reads it at import
    cmd = [*VIBE_RL, "swarm", "start", "--port", str(port), "--config", "config.yaml", "--model", args.model,
           "--experiment-dir", str(work / "exp")]
    for s in sets:
        cmd += ["--set", s]
    t0 = time.time()
    server = spawn(cmd, work / "server.log", cwd=project, env=env)
    rounds = []
    try:
        wait_healthy(url, server, 600.0, work / "server.log", interval=0.5, tail_chars=3000)
        client = Client(project, url, args.in_flight, seed, args.spy_pool)
        held_out, train_tasks = client.tasks[-args.eval_episodes:], client.tasks[:-args.eval_episodes]
        for target in range(0, args.steps + 1, args.eval_every):
            if target:
                client.train_until(target, train_tasks)
            status = client.swarm.status()
            t_eval = time.time()
            played = client.eval_round(held_out)
            uuids = [u for u, _, _ in played]
            share, votes = vote_parse_share(work / "exp" / "swarm.sqlite", uuids)
            cast = [(t, meta["roles"]) for _, _, meta in played for _, voter, t in meta.get("ballots", [])
                    if meta["roles"].get(voter) == "civilian"]
            ballots = [t is not None for t, _ in cast]
            on_spy = [roles.get(t) == "spy" for t, roles in cast]
            rounds.append({"step": status.global_step, "reward": interval([r for _, r, _ in played]),
                           "civilian_win_rate": win_interval([float(m.get("winner") == "civilian") for _, _, m in played]),
                           "legal_ballot_share": round(sum(ballots) / len(ballots), 4) if ballots else None,
                           "spy_ballot_share": round(sum(on_spy) / len(on_spy), 4) if on_spy else None,
                           "train_win_rate": win_interval(client.train_wins) if client.train_wins else None,
                           "vote_tool_call_parse_share": share, "vote_calls": votes,
                           "eval_s": round(time.time() - t_eval, 1)})
            client.train_wins = []
            print(json.dumps({"seed": seed, **rounds[-1]}), file=sys.stderr, flush=True)
        metrics = [json.loads(x) for x in (work / "exp" / "metrics.jsonl").read_text().splitlines()] \
            if (work / "exp" / "metrics.jsonl").exists() else []
        with sqlite3.connect(work / "exp" / "swarm.sqlite") as con:  # which frozen models played, in how many calls
            statics = dict(con.execute("SELECT model, COUNT(*) FROM turns WHERE static=1 GROUP BY model").fetchall())
    finally:
        stop(server)
    first, last = rounds[0]["reward"]["mean"], rounds[-1]["reward"]["mean"]
    return {"seed": seed, "rounds": rounds, "gain": round(last - first, 4), "rose": last > first,
            "first_update_s": round(metrics[0]["ts"] - t0, 1) if metrics else None, "wall_s": round(time.time() - t0, 1),
            "s_per_update": round(sum(m.get("update_s", 0) for m in metrics) / max(len(metrics), 1), 2),
            "train_reward_per_update": [round(m["reward_mean"], 4) for m in metrics],
            "retokenized_turns": sum(m.get("retokenized_turns", 0) for m in metrics), "static_calls": statics}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2", help="'smollm2', 'tiny' or a local HF directory")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--preset", default="cpu-demo", choices=sorted(PRESETS))
    ap.add_argument("--steps", type=int, default=10, help="Weight updates per seed")
    ap.add_argument("--eval-every", type=int, default=5, help="Updates between eval rounds")
    ap.add_argument("--eval-episodes", type=int, default=16, help="Held-out tasks, each played once per eval round")
    ap.add_argument("--in-flight", type=int, default=8, help="Episodes played at once")
    ap.add_argument("--max-tokens", type=int, default=16, help="Tokens per answer (VIBE_RL_MAX_TOKENS)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                    help="Server setting on top of the preset's (repeatable)")
    ap.add_argument("--spy-pool", type=int, default=0, metavar="K",
                    help="Training games' spy plays one of the K newest checkpoints (eval keeps the initial model)")
    ap.add_argument("--snapshot-every", type=int, default=10, help="Updates between checkpoints with --spy-pool")
    ap.add_argument("--out", type=Path, help="Also write the JSON here")
    ap.add_argument("--keep", type=Path, help="Keep the project and each seed's experiment dir here (metrics.jsonl, "
                                              "swarm.sqlite: `vibe-rl swarm plot DIR/seed0/exp`)")
    args = ap.parse_args()
    if args.steps % args.eval_every:
        ap.error("--steps must be a multiple of --eval-every")
    preset = dict(PRESETS[args.preset])
    if callable(preset["sets"]):  # cpu-demo: the dtype follows this CPU's bf16 support, decided once here
        preset["sets"] = preset["sets"]()
    if args.model.strip().lower() == "smollm2":  # built once here, not inside the first server's boot
        from vibe_rl.engine.smollm2 import ensure_smollm2

        ensure_smollm2()
    if args.keep:
        shutil.rmtree(args.keep, ignore_errors=True)
        args.keep.mkdir(parents=True)
    root = args.keep.resolve() if args.keep else Path(tempfile.mkdtemp(prefix="learning-curve-"))
    here = os.getcwd()
    t0 = time.time()
    try:
        project = root / "project"
        render(project, preset, args.spy_pool)
        results = []
        for seed in args.seeds:
            work = root / f"seed{seed}"
            work.mkdir()
            results.append(one_seed(project, work, args, preset, seed))
            os.chdir(here)
    finally:
        os.chdir(here)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    gains = [r["gain"] for r in results]
    mean = sum(gains) / len(gains)
    sd = math.sqrt(sum((g - mean) ** 2 for g in gains) / (len(gains) - 1)) if len(gains) > 1 else 0.0
    out = {"benchmark": "learning_curve", "model": args.model, "device": args.device, "preset": args.preset,
           "settings": {**preset, "extra_sets": args.sets, "steps": args.steps, "eval_every": args.eval_every,
                        "eval_episodes": args.eval_episodes, "max_tokens": args.max_tokens,
                        "spy_pool": args.spy_pool, "snapshot_every": args.snapshot_every if args.spy_pool else None},
           "seeds": args.seeds, "rose_in": sum(r["rose"] for r in results), "of": len(results),
           "mean_gain": round(mean, 4), "gain_sd": round(sd, 4), "wall_s": round(time.time() - t0, 1),
           "per_seed": results}
    text = json.dumps(out)
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
