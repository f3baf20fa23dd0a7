"""Soak test of the swarm server: many episodes in flight for minutes, while it trains.

Starts `vibe-rl swarm start --model tiny` on a free loopback port (its own process,
its own experiment dir), syncs a small job that updates and checkpoints as episodes
complete, and keeps `--episodes-in-flight` async clients busy for `--seconds`. Each
episode: begin (admin token), two chat calls with its own key, end (its own key) with a
task id shared by `grpo_n` episodes and a random reward in [0, 1].

Reports, as ONE JSON object: episodes/s; HTTP 5xx, 4xx and transport-error counts;
lost episodes = ends the server acknowledged that are missing from its SQLite store;
the server's RSS after warm-up and at the end, and its growth in percent.
Goal (issue #11): 0 5xx, 0 lost, RSS growth < 10 % after warm-up.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 300.0  # a response slower than this counts as a transport error (the connection is dropped)
JOB = ["train.batch_size=4", "train.grpo_n=4", "train.save_freq=10", "train.lr=0.001", "rollout.max_tokens=6",
       "model.max_model_len=256", "model.device=cpu"]


class Conn:
    """Minimal HTTP/1.1 keep-alive client (httpx would cost the 2-core box more CPU than the server)."""

    def __init__(self, port: int):
        self.port, self.reader, self.writer = port, None, None

    async def post(self, path: str, body: dict, auth: str) -> tuple[int, dict]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        data = json.dumps(body).encode()
        self.writer.write(f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{self.port}\r\ncontent-type: application/json\r\n"
                          f"authorization: Bearer {auth}\r\ncontent-length: {len(data)}\r\n\r\n".encode() + data)
        head = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), timeout=TIMEOUT_S)
        lines = head.decode("latin-1").split("\r\n")
        hdrs = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
        payload = await self.reader.readexactly(int(hdrs.get("content-length", 0)))
        return int(lines[0].split()[1]), json.loads(payload or b"{}")

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def worker(port: int, token: str, stop_at: float, counts: dict, tasks: itertools.count, grpo_n: int) -> None:
    conn = Conn(port)

    async def call(path: str, body: dict, auth: str) -> dict | None:
        while time.monotonic() < stop_at + 60:  # 429 (busy during an update): back off and retry
            try:
                status, data = await conn.post(path, body, auth)
            except (OSError, asyncio.IncompleteReadError, ValueError, asyncio.TimeoutError):
                counts["transport_errors"] += 1
                conn.close()
                return None
            if status == 429:
                await asyncio.sleep(0.2)
                continue
            if status >= 500:
                counts["http_5xx"] += 1
            elif status >= 400:
                counts["http_4xx"] += 1
            return data if status == 200 else None
        return None

    while time.monotonic() < stop_at:
        ep = await call("/episode/begin", {"discard_episode_timeout": 600}, token)
        if ep is None:
            continue
        for turn in range(2):
            await call("/v1/chat/completions", {"model": ep["model"], "max_tokens": 4, "user": f"p:{turn}",
                                                "messages": [{"role": "user", "content": f"turn {turn}: say a word"}]},
                       ep["api_key"])
        task_id = f"soak-{next(tasks) // grpo_n}"
        done = await call("/episode/end", {"episode_uuid": ep["episode_uuid"], "task": {"task_id": task_id},
                                           "output": {"reward": random.random()}}, ep["api_key"])
        if done is not None and not done.get("already_ended"):
            counts["ended"] += 1
            counts["acked"].append(ep["episode_uuid"])
    conn.close()


async def drive(port: int, token: str, in_flight: int, seconds: float, warmup: float, pid: int) -> dict:
    counts = {"ended": 0, "http_5xx": 0, "http_4xx": 0, "transport_errors": 0, "acked": []}
    t0 = time.monotonic()
    stop_at = t0 + seconds
    tasks = itertools.count()
    runners = [asyncio.create_task(worker(port, token, stop_at, counts, tasks, 4)) for _ in range(in_flight)]
    await asyncio.sleep(min(warmup, seconds))
    counts["rss_mb_after_warmup"], counts["ended_at_warmup"] = rss_mb(pid), counts["ended"]
    await asyncio.gather(*runners)
    counts["rss_mb_end"] = rss_mb(pid)
    counts["seconds"] = time.monotonic() - t0
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes-in-flight", type=int, default=128, help="Concurrent episodes")
    ap.add_argument("--seconds", type=float, default=180.0, help="How long to keep them in flight")
    ap.add_argument("--warmup", type=float, default=None, help="Seconds before the first RSS reading (default 1/6)")
    args = ap.parse_args()
    warmup = args.warmup if args.warmup is not None else args.seconds / 6

    sys.path.insert(0, str(ROOT))
    from vibe_rl.swarm import SwarmClient, TrainJob
    from vibe_rl.swarm.auth import client_token
    from vibe_rl.swarm.launch import free_port, spawn, stop, wait_healthy

    port = free_port()
    exp = tempfile.mkdtemp(prefix="vibe-rl-soak-")
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-c", "from vibe_rl.cli import main; main()", "swarm", "start", "--port", str(port),
           "--model", "tiny", "--experiment-dir", exp, *itertools.chain(*(("--set", s) for s in JOB))]
    server = spawn(cmd, Path(exp) / "server.log", cwd=ROOT)
    try:
        wait_healthy(url, server, 120.0, Path(exp) / "server.log", request_timeout=1.0, tail_chars=2000)
        with SwarmClient(url) as client:
            client.auto_sync_train_config_and_start_engine(TrainJob(), verbose=False)
            res = asyncio.run(drive(port, client_token(url), args.episodes_in_flight, args.seconds, warmup,
                                    server.pid))
            status = client.get_engine_status()
        db = sqlite3.connect(Path(exp) / "swarm.sqlite")
        in_store = {row[0] for row in db.execute("SELECT episode_uuid FROM episodes")}
        stored = sum(1 for u in res["acked"] if u in in_store)  # acknowledged ends found in the store
    finally:
        stop(server)
        shutil.rmtree(exp, ignore_errors=True)
    start, end = res["rss_mb_after_warmup"], res["rss_mb_end"]
    print(json.dumps({
        "benchmark": "soak",
        "episodes_in_flight": args.episodes_in_flight,
        "seconds": round(res["seconds"], 1),
        "episodes": res["ended"],
        "episodes_per_s": round(res["ended"] / res["seconds"], 2),
        "http_5xx": res["http_5xx"],
        "http_4xx": res["http_4xx"],
        "transport_errors": res["transport_errors"],
        "ended": res["ended"],
        "stored": stored,
        "lost_episodes": res["ended"] - stored,
        "global_step": status["global_step"],
        "server_errors": status["errors"][-3:],
        "rss_mb_after_warmup": round(start, 1),
        "rss_mb_end": round(end, 1),
        "rss_growth_pct": round(100 * (end - start) / start, 2) if start else None,
        "cpu_count": os.cpu_count(),
        "goals": {"http_5xx": 0, "lost_episodes": 0, "rss_growth_pct": "< 10"},
    }))


if __name__ == "__main__":
    main()
