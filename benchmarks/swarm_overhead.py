"""Swarm server overhead: episode cycles per second and the time the server adds to a chat call.

Starts `vibe-rl swarm start --model tiny` on a free loopback port (its own
process), syncs a job whose pool never triggers an update, then runs
`--concurrency` async clients for `--seconds`, each repeating one cycle:
begin_episode, one chat completion with max_tokens 1, end_episode.

"Added" time per chat call = the server's own wall time for the request (from
the request's arrival to its response headers, `x-vibe-server-ms`) minus the
time the request spent inside the engine (`x-vibe-engine-ms`, from submit to
the engine finishing it, batching wait included). Prints ONE JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * len(values)))], 3)


async def worker(client: httpx.AsyncClient, stop_at: float, warm_until: float, out: dict, wid: int) -> None:
    i = 0
    while time.perf_counter() < stop_at:
        i += 1
        r = await client.post("/episode/begin", json={})
        r.raise_for_status()
        ep = r.json()
        r = await client.post("/v1/chat/completions", headers={"Authorization": f"Bearer {ep['api_key']}"},
                              json={"model": ep["model"], "max_tokens": 1,
                                    "messages": [{"role": "user", "content": "Say one word."}]})
        r.raise_for_status()
        r2 = await client.post("/episode/end", json={"episode_uuid": ep["episode_uuid"],
                                                     "task": {"task_id": f"bench-{wid}-{i}"},
                                                     "output": {"reward": 0.0}})
        r2.raise_for_status()
        if time.perf_counter() >= warm_until:
            out["cycles"] += 1
            server = float(r.headers["x-vibe-server-ms"])
            engine = float(r.headers["x-vibe-engine-ms"])
            out["added"].append(server - engine)
            out["engine"].append(engine)


async def drive(url: str, concurrency: int, seconds: float, warmup: float) -> dict:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60.0) as client:
        out = {"cycles": 0, "added": [], "engine": []}
        t0 = time.perf_counter()
        warm_until, stop_at = t0 + warmup, t0 + warmup + seconds
        await asyncio.gather(*(worker(client, stop_at, warm_until, out, w) for w in range(concurrency)))
        measured = time.perf_counter() - warm_until
    return {"cycles": out["cycles"], "seconds": measured, "added": out["added"], "engine": out["engine"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--warmup", type=float, default=3.0)
    args = ap.parse_args()

    port = free_port()
    exp = tempfile.mkdtemp(prefix="vibe-rl-bench-")
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-c", "from vibe_rl.cli import main; main()", "swarm", "start", "--port", str(port), "--model", "tiny",
           "--experiment-dir", exp, "--set", "rollout.max_tokens=1", "--set", "train.grpo_n=1000000"]
    server = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        sys.path.insert(0, str(ROOT))
        from vibe_rl.swarm import SwarmClient, TrainJob

        deadline = time.monotonic() + 120
        while True:
            try:
                httpx.get(url + "/healthz", timeout=1.0)
                break
            except httpx.HTTPError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"server did not start: {server.stderr.read().decode()[-2000:]}") from None
                time.sleep(0.2)
        with SwarmClient(url) as client:
            client.auto_sync_train_config_and_start_engine(TrainJob(), verbose=False)
        res = asyncio.run(drive(url, args.concurrency, args.seconds, args.warmup))
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(exp, ignore_errors=True)
    print(json.dumps({
        "benchmark": "swarm_overhead",
        "concurrency": args.concurrency,
        "cycles": res["cycles"],
        "seconds": round(res["seconds"], 2),
        "episode_cycles_per_s": round(res["cycles"] / res["seconds"], 1),
        "added_ms_p50": pct(res["added"], 0.50),
        "added_ms_p99": pct(res["added"], 0.99),
        "engine_ms_p50": pct(res["engine"], 0.50),
        "cpu_count": os.cpu_count(),
        "goals": {"episode_cycles_per_s": ">= 200", "added_ms_p50": "< 2"},
    }))


if __name__ == "__main__":
    main()
