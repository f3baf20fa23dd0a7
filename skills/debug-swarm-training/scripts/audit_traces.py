#!/usr/bin/env python3
"""Check from a swarm server's recorded traces that every role played on its team's model.

Usage:
  python audit_traces.py --url http://127.0.0.1:10086 --expect civilian=@trainable --expect spy=qwen-max

Reads GET /control/traces?limit=N (one row per chat call, `player` = the call's
`user="<role>:<player_id>"` tag) and prints, per role, which models its calls reached.
`--expect ROLE=MODEL` states where a role's calls must go; `@trainable` means the server's own
trainable model. Exit code 1 when a role reached another model or calls carry no player tag,
else 0. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.parse
import urllib.request
from collections import defaultdict


def admin_headers(url: str) -> dict:
    """The swarm server's admin token, found like SwarmClient finds it: $VIBE_RL_SWARM_TOKEN, the file named
    by $VIBE_RL_SWARM_TOKEN_FILE, or (loopback URLs only) the token the server registered for its port."""
    token = os.environ.get("VIBE_RL_SWARM_TOKEN", "").strip()
    path = os.environ.get("VIBE_RL_SWARM_TOKEN_FILE")
    parts = urllib.parse.urlsplit(url)
    host = (parts.hostname or "").lower()
    if not token and not path and (host in ("localhost", "::1", "localhost.localdomain") or host.startswith("127.")):
        cache = os.environ.get("VIBE_RL_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "vibe-rl")
        path = os.path.join(cache, "swarm-tokens", f"port-{parts.port or 80}")
    if not token and path:
        try:
            with open(path, encoding="utf-8") as fh:
                token = fh.read().strip()
        except OSError:
            token = ""
    return {"Authorization": f"Bearer {token}"} if token else {}


def get_json(url: str) -> dict:
    with urllib.request.urlopen(urllib.request.Request(url, headers=admin_headers(url)), timeout=15) as resp:
        return json.loads(resp.read().decode("utf-8"))


def audit(calls: list[dict], expect: dict[str, str], trainable: str) -> tuple[dict, list[str]]:
    """(role -> model -> players) and the problems found."""
    seen: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    untagged = 0
    for call in calls:
        player = str(call.get("player") or "")
        if ":" not in player:
            untagged += 1
            continue
        role = player.split(":", 1)[0]
        model = trainable if not call.get("static") else str(call.get("model"))
        seen[role][model].add(player)
    problems = []
    if untagged:
        problems.append(f"{untagged} calls carry no user='<role>:<player_id>' tag")
    for role, want in expect.items():
        want = trainable if want == "@trainable" else want
        if role not in seen:
            problems.append(f"role {role!r}: no calls recorded")
            continue
        for model, players in seen[role].items():
            if model != want:
                names = ", ".join(sorted(players)[:6])
                problems.append(f"role {role!r} should reach {want!r} but {len(players)} players called "
                                f"{model!r}: {names}")
    return seen, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:10086", help="swarm server URL")
    parser.add_argument("--expect", action="append", default=[], metavar="ROLE=MODEL",
                        help="where a role's calls must go (repeatable); @trainable = the server's model")
    parser.add_argument("--limit", type=int, default=2000, help="how many recent calls to read")
    args = parser.parse_args(argv)
    expect = {}
    for item in args.expect:
        role, sep, model = item.partition("=")
        if not sep or not role or not model:
            parser.error(f"--expect {item!r}: use ROLE=MODEL, e.g. spy=qwen-max")
        expect[role] = model
    base = args.url.rstrip("/")
    trainable = str(get_json(base + "/control/status").get("model") or "@trainable")
    calls = get_json(f"{base}/control/traces?limit={args.limit}").get("calls") or []
    seen, problems = audit(calls, expect, trainable)
    print(f"{len(calls)} calls; trainable model: {trainable}")
    for role in sorted(seen):
        parts = [f"{model} ({len(players)} players)" for model, players in sorted(seen[role].items())]
        print(f"  {role}: " + ", ".join(parts))
    for line in problems:
        print(f"problem: {line}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
