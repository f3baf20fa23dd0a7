"""Is training learning anything? Read from a server's own records (`experiments/<server>/swarm.sqlite`).

- `first_signal`: the first update whose GRPO groups were not all equal (a non-zero gradient).
- `health_notes`: the three signs that a run goes through the motions without learning, each with its
  likely fix: far more aborted than completed episodes, a high share of model answers that hold no
  parseable action (tool call), and a streak of updates with zero gradient.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

ABORT_RATIO = 3  # aborted >= ABORT_RATIO x completed (and at least ABORT_MIN) is flagged
ABORT_MIN = 6
UNPARSEABLE_SHARE = 0.5  # flagged above this share of trainable answers (at least UNPARSEABLE_MIN of them)
UNPARSEABLE_MIN = 8
FLAT_WINDOW, FLAT_SHARE = 5, 0.5  # ... and only while at least half of the last 5 updates had zero gradient
ZERO_STREAK = 3  # this many zero-gradient updates in a row is flagged


def _store(root: Path, server: str):
    from vibe_rl.swarm.server.store import Store

    path = Path(root) / "experiments" / server / "swarm.sqlite"
    return Store(path) if path.is_file() else None


def updates_since(root: Path, server: str, step: int) -> list[dict[str, Any]]:
    """The server's recorded updates after global step `step` (oldest first)."""
    store = _store(root, server)
    if store is None:
        return []
    try:
        return [u for u in store.updates(limit=1000) if int(u.get("step") or 0) > step]
    finally:
        store.close()


def zero_gradient(update: dict[str, Any]) -> bool:
    groups = int(update.get("groups") or 0)
    return groups == 0 or int(update.get("all_equal_groups") or 0) >= groups


def first_signal(updates: list[dict[str, Any]]) -> int | None:
    return min((int(u["step"]) for u in updates if not zero_gradient(u)), default=None)


def describe_job(job: dict[str, Any]) -> str:
    """The numbers of a server's effective job that decide what one update costs."""
    model, train, rollout = job.get("model") or {}, job.get("train") or {}, job.get("rollout") or {}
    return (f"model {model.get('path')}, train.batch_size={train.get('batch_size')}, "
            f"train.grpo_n={train.get('grpo_n')}, rollout.max_tokens={rollout.get('max_tokens')}")


def unparseable_share(root: Path, server: str, limit: int = 400) -> tuple[int, int]:
    """(answers without a parseable tool call, trainable answers) among the latest `limit` recorded turns."""
    from vibe_rl.swarm.server.chat import parse_tool_calls

    store = _store(root, server)
    if store is None:
        return 0, 0
    try:
        rows = store.recent_answers(limit)
    finally:
        store.close()
    bad = sum(1 for text in rows if not parse_tool_calls(text or "")[1])
    return bad, len(rows)


def health_notes(root: Path, statuses: dict[str, dict[str, Any]], progress: dict[str, Any], spec) -> list[str]:
    notes = []
    for name, st in statuses.items():
        pool = st.get("pool") or {}
        prog = progress.get(name)
        updates = updates_since(root, name, prog.start_step if prog else 0)  # this run's, oldest first
        completed = int(pool.get("completed_episodes") or 0) + sum(int(u.get("episodes") or 0) for u in updates)
        aborted = int(pool.get("aborted_episodes") or 0)
        if aborted >= ABORT_MIN and aborted >= ABORT_RATIO * max(completed, 1):
            notes.append(f"{name}: {aborted} episodes were aborted but only {completed} completed. Likely cause: "
                         "the episode code raises (see the client log), or self-play opens one episode per seat "
                         "and aborts seats that never act; make every opened episode end with a reward, or open "
                         "episodes only for seats that will act")
        recent = updates[-FLAT_WINDOW:]
        flat = not recent or sum(zero_gradient(u) for u in recent) >= FLAT_SHARE * len(recent)
        if spec.constraints.use_openai_sdk_tools and flat:  # rewards that still differ: the answers carry signal
            bad, total = unparseable_share(root, name)
            if total >= UNPARSEABLE_MIN and bad / total > UNPARSEABLE_SHARE:
                notes.append(f"{name}: {bad} of the latest {total} model answers hold no parseable tool call. Where "
                             "those calls offered tools (a move, a vote), the game took its no-action outcome, and "
                             "equal outcomes give equal rewards (zero gradient). Likely fix: score an answer with no "
                             "valid action as that seat's worst outcome, never a fallback move (write-swarm-client: "
                             "unparseable answers), shorten the prompt, or start from a model that follows the tool "
                             "format (the tiny model almost never does; SmolLM2 learns it from a few SFT steps on the format, "
                             "vibe_rl.rl.sft); `vibe-rl play DIR` shows the answers")
        if prog is not None:
            streak = 0
            for u in updates:
                streak = streak + 1 if zero_gradient(u) else 0
            if streak >= ZERO_STREAK:
                notes.append(f"{name}: the last {streak} updates had zero gradient (every GRPO group had equal "
                             "rewards), so no weight moved. Likely fix: a reward that tells episodes of one task "
                             "apart (partial credit, a penalty for unparseable answers), a larger train.grpo_n, "
                             "or a warmer sampling temperature")
    return notes
