"""Swarm server overhead: episode cycles per second and the time the server adds to a chat call.

Starts `vibe-rl swarm start --model tiny` on a free loopback port (its own
process), syncs a job whose pool never triggers an update, then runs
`--concurrency` async clients for `--seconds`, each repeating one cycle:
begin_episode, one chat completion with max_tokens 1, end_episode.

"Added" time per chat call = the server's own wall time for the request (from
the request's arrival to its response headers, `x-vibe-server-ms`) minus the
time the request spent inside the engine (`x-vibe-engine-ms`, from submit to
the engine finishing it, batching wait included). At 32 clients the added time is mostly
queueing: the calls of one engine batch finish together and are answered one after another
on the event loop; `serial_added_ms_p50` (one client) shows the per-call cost alone.
Prints ONE JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * len(values)))], 3)


class Conn:
    """A minimal HTTP/1.1 keep-alive client on asyncio streams: the measuring side should cost
    as little CPU as possible on a 2-core machine (httpx costs several times more per call)."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.reader = self.writer = None

    async def post(self, path: str, body: dict, headers: dict[str, str] | None = None) -> tuple[int, dict, dict]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        data = json.dumps(body).encode()
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self.writer.write(f"POST {path} HTTP/1.1\r\nhost: {self.host}\r\ncontent-type: application/json\r\n"
                          f"content-length: {len(data)}\r\n{extra}\r\n".encode() + data)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        hdrs = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
        payload = await self.reader.readexactly(int(hdrs.get("content-length", 0)))
        if status >= 400:
            raise RuntimeError(f"{path} -> {status}: {payload[:300]!r}")
        return status, hdrs, json.loads(payload)


async def worker(host: str, port: int, stop_at: float, warm_until: float, out: dict, wid: int) -> None:
    from vibe_rl.swarm.auth import client_token

    conn = Conn(host, port)
    admin = {"authorization": f"Bearer {client_token(f'http://{host}:{port}')}"}
    i = 0
    while time.perf_counter() < stop_at:
        i += 1
        _, _, ep = await conn.post("/episode/begin", {}, admin)
        _, hdrs, _ = await conn.post("/v1/chat/completions",
                                     {"model": ep["model"], "max_tokens": 1,
                                      "messages": [{"role": "user", "content": "Say one word."}]},
                                     {"authorization": f"Bearer {ep['api_key']}"})
        await conn.post("/episode/end", {"episode_uuid": ep["episode_uuid"], "task": {"task_id": f"bench-{wid}-{i}"},
                                         "output": {"reward": 0.0}}, {"authorization": f"Bearer {ep['api_key']}"})
        if time.perf_counter() >= warm_until:
            out["cycles"] += 1
            server, engine = float(hdrs["x-vibe-server-ms"]), float(hdrs["x-vibe-engine-ms"])
            out["added"].append(server - engine)
            out["engine"].append(engine)


async def drive(host: str, port: int, concurrency: int, seconds: float, warmup: float) -> dict:
    out = {"cycles": 0, "added": [], "engine": []}
    t0 = time.perf_counter()
    warm_until, stop_at = t0 + warmup, t0 + warmup + seconds
    await asyncio.gather(*(worker(host, port, stop_at, warm_until, out, w) for w in range(concurrency)))
    measured = time.perf_counter() - warm_until
    return {"cycles": out["cycles"], "seconds": measured, "added": out["added"], "engine": out["engine"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--url", default=None, help="Use an already started server (e.g. to profile it) instead of one of ours")
    args = ap.parse_args()
    if args.url:
        from vibe_rl.swarm import SwarmClient, TrainJob

        with SwarmClient(args.url) as client:
            client.auto_sync_train_config_and_start_engine(TrainJob(), verbose=False)
        host, port = args.url.split("//")[1].split(":")
        report(asyncio.run(drive(host, int(port), args.concurrency, args.seconds, args.warmup)), args)
        return

    sys.path.insert(0, str(ROOT))
    from vibe_rl.swarm import SwarmClient, TrainJob
    from vibe_rl.swarm.launch import free_port, spawn, stop, wait_healthy

    port = free_port()
    exp = tempfile.mkdtemp(prefix="vibe-rl-bench-")
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-c", "from vibe_rl.cli import main; main()", "swarm", "start", "--port", str(port), "--model", "tiny",
           "--experiment-dir", exp, "--set", "rollout.max_tokens=1", "--set", "train.grpo_n=1000000"]
    server = spawn(cmd, Path(exp) / "server.log", cwd=ROOT)
    try:
        wait_healthy(url, server, 120.0, Path(exp) / "server.log", request_timeout=1.0, tail_chars=2000)
        with SwarmClient(url) as client:
            client.auto_sync_train_config_and_start_engine(TrainJob(), verbose=False)
        res = asyncio.run(drive("127.0.0.1", port, args.concurrency, args.seconds, args.warmup))
        res["serial"] = asyncio.run(drive("127.0.0.1", port, 1, min(3.0, args.seconds), 0.5))
    finally:
        stop(server, grace=20.0)
        shutil.rmtree(exp, ignore_errors=True)
    report(res, args)


def report(res: dict, args: argparse.Namespace) -> None:
    print(json.dumps({
        "benchmark": "swarm_overhead",
        "concurrency": args.concurrency,
        "cycles": res["cycles"],
        "seconds": round(res["seconds"], 2),
        "episode_cycles_per_s": round(res["cycles"] / res["seconds"], 1),
        "added_ms_p50": pct(res["added"], 0.50),
        "added_ms_p99": pct(res["added"], 0.99),
        "engine_ms_p50": pct(res["engine"], 0.50),
        # one client at a time: the server's own cost per call without queueing behind other calls
        "serial_added_ms_p50": pct(res["serial"]["added"], 0.50) if "serial" in res else None,
        "cpu_count": os.cpu_count(),
        "goals": {"episode_cycles_per_s": ">= 200", "added_ms_p50": "< 2"},
    }))


if __name__ == "__main__":
    main()
