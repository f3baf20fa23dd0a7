"""Seconds to the first weight update of a Who-is-Spy project on a GPU, run the way a new user runs it.

Builds a random-init Qwen2.5 model of --shape offline (the tiny tokenizer's vocabulary, so every
sampled id decodes to text), renders a project with `vibe-rl new` from an English spec (6 players,
1 spy, batch 4 x group 4, max_tokens 256, the spies on qwen-max: without DASHSCOPE_API_KEY the server
serves it as a frozen copy of the same model) and runs `vibe-rl run --until first-step` (real tmux,
real uv). A random model rarely names a living player, so most ballots abstain and games often last
all their rounds: about 40 sequential 256-token calls a game. Prints ONE JSON object: seconds from
`vibe-rl run` to the first update, the first update's figures and what the server recorded
(LLM calls, tokens, calls per game).

    python benchmarks/spy_first_step.py --shape 0.5b          # on a GPU machine with tmux and uv
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VIBE_RL = str(Path(sys.executable).parent / "vibe-rl")
SPEC = ("Train the civilians of Who is Spy with 6 players (1 spy) on the model {path}, 1 GPU, batch size 4, "
        "group size 4, max_tokens 256; the spies play qwen-max.")


def recorded(experiment: Path) -> dict:
    """What the server's SQLite holds at the first update: calls, generated tokens, calls per game."""
    con = sqlite3.connect(experiment / "swarm.sqlite")
    try:
        calls, static, generated, first, last = con.execute(
            "SELECT COUNT(*), SUM(static), SUM(LENGTH(response_ids)), MIN(ts), MAX(ts) FROM turns").fetchone()
        games = con.execute("SELECT COUNT(*) FROM episodes WHERE trained_step IS NOT NULL").fetchone()[0]
        per_game = con.execute("SELECT AVG(n) FROM (SELECT COUNT(*) AS n FROM turns t JOIN episodes e "
                               "USING (episode_uuid) WHERE e.trained_step IS NOT NULL GROUP BY episode_uuid)").fetchone()[0]
    finally:
        con.close()
    span = (last or 0) - (first or 0)
    return {"llm_calls": calls, "static_calls": static, "trained_games": games,
            "calls_per_trained_game": round(per_game or 0, 1),
            "generated_tokens_approx": (generated or 0) // 4,  # ids are stored as int32 blobs
            "calls_s": round(calls / span, 1) if span else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="0.5b", help="Qwen2.5 shape of the random model: 0.5b|1.5b|3b|7b")
    ap.add_argument("--device", default="cuda", help="where the random model is built (the server picks its own)")
    ap.add_argument("--timeout", type=int, default=420, help="seconds `vibe-rl run` may take")
    ap.add_argument("--set", action="append", default=[], help="a server config override, as for vibe-rl run")
    args = ap.parse_args()

    from vibe_rl.engine.shapes import build_random_model
    from vibe_rl.swarm.launch import free_port

    work = Path(tempfile.mkdtemp(prefix="vibe-rl-spy-"))
    model = work / f"qwen2.5-{args.shape}-random"
    t0 = time.time()
    build_random_model(args.shape, str(model), device=args.device, vocab="tokenizer")
    out: dict = {"shape": args.shape, "build_model_s": round(time.time() - t0, 1)}
    project = work / "spy"
    env = {k: v for k, v in os.environ.items() if k != "DASHSCOPE_API_KEY"}
    res = subprocess.run([VIBE_RL, "new", SPEC.format(path=model), "--planner", "offline", "--out", str(project)],
                         env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"vibe-rl new failed:\n{res.stdout}\n{res.stderr}")
    spec = json.loads((project / "task_spec.json").read_text())
    for server in spec["servers"]:  # free ports: never the fixed 10086
        server["port"] = free_port()
    (project / "task_spec.json").write_text(json.dumps(spec, indent=2))
    sets = [a for s in args.set for a in ("--set", s)]
    t1 = time.time()
    res = subprocess.run([VIBE_RL, "run", str(project), "--until", "first-step", "--timeout", str(args.timeout),
                          "--stop", *sets], env=env, capture_output=True, text=True)
    report_path = project / "logs" / "autopilot-report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    out["outcome"] = report.get("outcome")
    if report.get("first_step_unix") is None:
        out["ok"] = False
        out["error"] = (res.stdout + res.stderr)[-1500:]
        logs = sorted((project / "logs").glob("*swarm-server*.log"))
        out["server_log_tail"] = logs[0].read_text(errors="replace")[-1500:] if logs else None
    else:
        out["ok"] = True
        out["run_to_first_step_s"] = round(report["first_step_unix"] - t1, 1)
        out["venv_seconds"] = report.get("venv_seconds")
    experiment = project / "experiments" / "server1"
    metrics = experiment / "metrics.jsonl"
    if metrics.exists() and metrics.read_text().strip():
        first = json.loads(metrics.read_text().splitlines()[0])
        out["first_update"] = {k: first.get(k) for k in ("seconds_per_step", "episodes", "trainable_turns",
                                                          "tokens", "update_s", "tokens_per_s")}
    if (experiment / "swarm.sqlite").exists():
        out["recorded"] = recorded(experiment)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
