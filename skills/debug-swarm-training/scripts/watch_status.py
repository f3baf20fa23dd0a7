#!/usr/bin/env python3
"""Watch a vibe-rl swarm server with back-off until a weight-update step, or a diagnosis.

Usage: python watch_status.py --url http://127.0.0.1:10086 [--until-step 1] [--max-wait 3600]

Polls GET /control/status after 15 s, 30 s, 60 s, 120 s, then every 300 s, printing one line
per poll. Stops early when the status shows a known failure. Exit codes: 0 the step was
reached, 1 a failure was diagnosed, 2 the wait ran out. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

SCHEDULE = (15, 30, 60, 120, 300)


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


def fetch_status(url: str, timeout: float = 10.0) -> dict | None:
    """The status JSON, or None when the server does not answer."""
    try:
        request = urllib.request.Request(url.rstrip("/") + "/control/status", headers=admin_headers(url))
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return json.loads(resp.read().decode("utf-8"))
    except (urllib.error.URLError, OSError, ValueError):
        return None


def diagnose(status: dict) -> list[str]:
    """Known failure signatures visible in one status snapshot."""
    found = []
    pool = status.get("pool") or {}
    grpo_n = max(int(pool.get("grpo_n") or 1), 1)
    tasks = status.get("tasks") or []
    for row in tasks:
        task_id, episodes = str(row.get("task_id", "")), int(row.get("episodes") or 0)
        if not task_id.strip() and episodes:
            found.append(f"{episodes} episodes have an empty task_id: give every task its own id (its seed)")
        elif episodes > 3 * grpo_n and episodes >= 8:
            found.append(f"task {task_id!r} holds {episodes} episodes (grpo_n={grpo_n}): task_id repeats "
                         "across tasks; make it each task's seed")
    completed, target = int(pool.get("completed_episodes") or 0), int(pool.get("target_episodes") or 0)
    if target and completed > 2 * target and int(pool.get("completed_tasks") or 0) <= 1:
        found.append(f"{completed} episodes but only {pool.get('completed_tasks')} task: task_id is constant")
    if pool.get("policy") == "non_dummy_tasks" and int(pool.get("completed_tasks") or 0) >= 2 * max(
            int(pool.get("target_tasks") or 1), 1) and not pool.get("completed_non_dummy_tasks"):
        found.append("no task has differing rewards: every group is a dummy; revisit the reward design")
    last = status.get("last_update") or {}
    if last.get("nan_skipped"):
        found.append(f"step {last.get('step')} had a non-finite loss and was skipped: lower train.lr, use bf16")
    for error in status.get("errors") or []:
        found.append(f"server error: {error}")
    return found


def summary(status: dict) -> str:
    pool = status.get("pool") or {}
    last = status.get("last_update") or {}
    reward = last.get("reward_mean")
    return (f"state={status.get('state')} step={status.get('global_step')} "
            f"episodes={pool.get('completed_episodes')}/{pool.get('target_episodes')} "
            f"tasks={pool.get('completed_tasks')}/{pool.get('target_tasks')} "
            f"running={len(status.get('running_episodes') or [])} "
            f"discarded={pool.get('discarded_episodes')}"
            + (f" reward={reward:.3f}" if isinstance(reward, (int, float)) else ""))


def watch(url: str, until_step: int, max_wait: float, schedule=SCHEDULE, first_wait: float | None = None) -> int:
    start, polls, down_since = time.monotonic(), 0, None
    while True:
        status = fetch_status(url)
        elapsed = time.monotonic() - start
        if status is None:
            down_since = down_since if down_since is not None else elapsed
            print(f"[{elapsed:6.0f}s] no answer from {url} (down for {elapsed - down_since:.0f}s)", flush=True)
        else:
            down_since = None
            print(f"[{elapsed:6.0f}s] {summary(status)}", flush=True)
            if int(status.get("global_step") or 0) >= until_step:
                print(f"reached global_step {status.get('global_step')}")
                return 0
            found = diagnose(status)
            if found:
                print("diagnosis:\n  " + "\n  ".join(found))
                return 1
        wait = schedule[min(polls, len(schedule) - 1)] if first_wait is None or polls else first_wait
        if elapsed + wait > max_wait:
            print(f"gave up after {elapsed:.0f}s without reaching step {until_step}; read the server and "
                  "client panes (tmux capture-pane -p -t <session>)")
            return 2
        polls += 1
        time.sleep(wait)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:10086", help="swarm server URL")
    parser.add_argument("--until-step", type=int, default=1, help="stop when global_step reaches this (default 1)")
    parser.add_argument("--max-wait", type=float, default=3600, help="give up after this many seconds")
    parser.add_argument("--once", action="store_true", help="one snapshot and its diagnosis, then exit")
    args = parser.parse_args(argv)
    if args.once:
        status = fetch_status(args.url)
        if status is None:
            print(f"no answer from {args.url}")
            return 2
        print(summary(status))
        found = diagnose(status)
        for line in found:
            print(f"diagnosis: {line}")
        return 1 if found else 0
    return watch(args.url, args.until_step, args.max_wait)


if __name__ == "__main__":
    sys.exit(main())
