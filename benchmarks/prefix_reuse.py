"""How much of each prompt a prefix cache could reuse, on real episodes of the three template families.

For each family it starts real swarm servers (`vibe-rl swarm start --model tiny`, CPU) on free loopback
ports, runs the generated project's own `agent_roll.py` against them until `--episodes` episodes are
stored, stops everything, and replays the recorded calls from each server's SQLite (`turns` table).

Definition (token level, exact ids). Calls are grouped by (server, episode, model): a static opponent
served by the server is another engine with its own cache. Within a group, in the order the calls were
recorded, call k's prompt P_k has `reusable_k` = max over earlier calls j < k of the longest common
prefix of P_k and (P_j + R_j), where R_j are the ids call j sampled; the first call of a group reuses
nothing. `reuse` = sum(reusable_k) / sum(len(P_k)) over all calls of the family. `reuse_across_episodes`
is the same with every earlier call on the same server and model, of any episode (a cache that never
evicts): it adds what episodes share, e.g. the system prompt. A real paged cache reuses whole blocks
only, so it sees slightly less than these token counts.

    python benchmarks/prefix_reuse.py [--episodes 4] [--max-tokens 16] [--projects generated] [--label after]

`--projects DIR` points at a folder holding who_is_spy/, werewolves/ and multi_model_translation/ (e.g.
an older checkout's generated/ for a before/after comparison). Prints ONE JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from array import array
from pathlib import Path

from vibe_rl.swarm.launch import ServerNotReadyError, free_port, spawn, stop, wait_healthy

ROOT = Path(__file__).resolve().parents[1]
VIBE_RL = str(Path(sys.executable).parent / "vibe-rl")
SERVERS = {"who_is_spy": 1, "werewolves": 1, "multi_model_translation": 2}
KEYS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "DASHSCOPE_API_KEY", "ANTHROPIC_API_KEY", "JUDGE_MODEL", "JUDGE_BASE_URL")


def start_server(exp_dir: Path, config: Path, max_tokens: int, env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    """The project's own server config (its static models), with the tiny model on CPU and small groups."""
    port = free_port()
    cmd = [VIBE_RL, "swarm", "start", "--port", str(port), "--config", str(config), "--model", "tiny",
           "--experiment-dir", str(exp_dir),
           "--set", "train.batch_size=2", "--set", "train.grpo_n=2", "--set", f"rollout.max_tokens={max_tokens}",
           "--set", "model.max_model_len=4096", "--set", "model.device=cpu"]
    log = exp_dir.parent / f"{exp_dir.name}.log"
    proc = spawn(cmd, log, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, 120.0, interval=0.3)
    except ServerNotReadyError:
        proc.kill()
        raise SystemExit(f"server did not start; see {log}") from None
    return proc, url


def stored_episodes(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=5) as con:
            return con.execute("SELECT COUNT(*) FROM episodes").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0


def ids(blob: bytes | None) -> list[int]:
    out = array("i")
    if blob:
        out.frombytes(blob)
    return out.tolist()


def lcp(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class Trie:
    """Token trie of earlier prompt+response sequences: the longest prefix match in O(length)."""

    def __init__(self) -> None:
        self.root: dict = {}

    def match(self, seq: list[int]) -> int:
        node, n = self.root, 0
        for t in seq:
            node = node.get(t)
            if node is None:
                break
            n += 1
        return n

    def add(self, seq: list[int]) -> None:
        node = self.root
        for t in seq:
            node = node.setdefault(t, {})


def replay(dbs: list[Path]) -> dict:
    """Reuse figures over every trainable and locally served call in the given servers' stores."""
    prompt_tokens = within = across = calls = 0
    for n, db in enumerate(dbs):
        with sqlite3.connect(db) as con:
            rows = con.execute("SELECT episode_uuid, model, prompt_ids, response_ids FROM turns "
                               "ORDER BY ts, episode_uuid, idx").fetchall()
        groups: dict[tuple, list[list[int]]] = {}
        tries: dict[str, Trie] = {}
        for episode, model, p, r in rows:
            prompt, response = ids(p), ids(r)
            if not prompt:  # a call forwarded to an external API has no ids
                continue
            earlier = groups.setdefault((n, episode, model), [])
            trie = tries.setdefault(model, Trie())
            calls += 1
            prompt_tokens += len(prompt)
            within += max((lcp(prompt, seq) for seq in earlier), default=0)
            across += trie.match(prompt)
            earlier.append(prompt + response)
            trie.add(prompt + response)
    return {"calls": calls, "prompt_tokens": prompt_tokens,
            "reuse": round(within / prompt_tokens, 4) if prompt_tokens else None,
            "reuse_across_episodes": round(across / prompt_tokens, 4) if prompt_tokens else None}


def run_family(family: Path, episodes: int, max_tokens: int, timeout: float, work: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in KEYS} | {"PYTHONUNBUFFERED": "1"}
    project = work / family.name
    shutil.copytree(family, project, ignore=shutil.ignore_patterns("__pycache__", ".*"))
    procs, dbs = [], []
    try:
        for i in range(SERVERS[family.name]):
            config = project / ("config.yaml" if i == 0 else f"config_server{i + 1}.yaml")
            proc, url = start_server(work / f"{family.name}-server{i + 1}", config, max_tokens, env)
            procs.append(proc)
            dbs.append(work / f"{family.name}-server{i + 1}" / "swarm.sqlite")
            env["VIBE_RL_SWARM_URL" if i == 0 else f"VIBE_RL_SWARM_URL_{i + 1}"] = url
        env["VIBE_RL_MAX_TOKENS"] = str(max_tokens)
        log = open(work / f"{family.name}-client.log", "wb")
        client = subprocess.Popen([sys.executable, "agent_roll.py"], cwd=project, env=env, stdout=log,
                                  stderr=subprocess.STDOUT)
        procs.insert(0, client)
        deadline = time.monotonic() + timeout
        while stored_episodes(dbs[0]) < episodes:
            if client.poll() is not None:
                raise SystemExit(f"{family.name}: agent_roll.py exited; see {log.name}:\n"
                                 + (work / f"{family.name}-client.log").read_text()[-2000:])
            if time.monotonic() > deadline:
                raise SystemExit(f"{family.name}: fewer than {episodes} episodes after {timeout:g} s")
            time.sleep(0.5)
    finally:
        stop(procs)
    return {"episodes": stored_episodes(dbs[0]), **replay(dbs)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=4, help="episodes stored per family before stopping")
    ap.add_argument("--max-tokens", type=int, default=16, help="rollout.max_tokens of the servers")
    ap.add_argument("--projects", default=str(ROOT / "generated"), help="folder with the three generated projects")
    ap.add_argument("--families", default=",".join(SERVERS), help="comma-separated families to run")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per family at most")
    ap.add_argument("--label", default="", help="a name for this layout, echoed in the output")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (servers' SQLite, logs)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="prefix-reuse-"))
    out: dict = {"benchmark": "prefix_reuse", "label": args.label, "projects": args.projects,
                 "episodes": args.episodes, "max_tokens": args.max_tokens, "families": {}}
    try:
        for name in args.families.split(","):
            try:
                out["families"][name] = run_family(Path(args.projects) / name, args.episodes, args.max_tokens,
                                                   args.timeout, work)
            except SystemExit as exc:  # reported in the JSON; the other families still run
                out["families"][name] = {"error": str(exc)[-1500:]}
    finally:
        if args.keep:
            out["work_dir"] = str(work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
