"""The status line of `vibe-rl run`: rates from the servers' cumulative counters, the episodes the next
update needs, an estimate to the target; plain lines every few seconds, or one live line on a terminal."""

from __future__ import annotations

import io

from vibe_rl.autopilot.progress import ProgressLine, clock


def status(step: int, done: int, calls: int, tokens: int, ended: int, per_step: float | None = None) -> dict:
    return {"state": "ROLLING", "global_step": step, "pool": {"completed_episodes": done, "target_episodes": 4},
            "counters": {"llm_calls": calls, "generated_tokens": tokens, "episodes_ended": ended},
            "last_update": {"step": step, "seconds_per_step": per_step} if per_step else None}


def test_rates_episodes_and_estimate():
    line = ProgressLine(live=False)
    line.render({"server1": status(0, 0, 0, 0, 0)}, {"server1": 3}, elapsed=0.0, now=100.0)
    text = line.render({"server1": status(1, 2, 40, 600, 6, per_step=8.0)}, {"server1": 3}, elapsed=65.0, now=110.0)
    assert "server1 ROLLING step 1/3" in text and "episodes 2/4" in text
    assert "4.0 calls/s" in text and "60 tok/s" in text and "8.0 s/step" in text
    # 2 episodes to the next update at 0.6 episodes/s, then one more step of 8 s
    assert "elapsed 1m05s" in text and f"to go ~{clock(2 / 0.6 + 8.0)}" in text


def test_plain_lines_are_spaced_and_a_live_line_is_rewritten_in_place():
    printed: list[str] = []
    plain = ProgressLine(out=printed.append, every=3600.0, live=False)
    for _ in range(3):
        plain.show({"server1": status(0, 1, 5, 50, 1)}, {"server1": 1}, elapsed=1.0)
    assert len(printed) == 1 and printed[0].startswith("[vibe-rl] server1 ROLLING step 0/1")

    term = io.StringIO()
    live = ProgressLine(out=printed.append, stream=term, live=True)
    live.show({"server1": status(0, 1, 5, 50, 1)}, {"server1": 1}, elapsed=1.0)
    live.show({"server1": status(1, 0, 9, 90, 2)}, {"server1": 1}, elapsed=2.0)
    live.clear()
    assert term.getvalue().count("\r\x1b[2K") == 3 and "step 1/1" in term.getvalue() and "to go ~0s" in term.getvalue()
    assert len(printed) == 1  # the live line never goes through out()


def test_a_server_waiting_for_its_job_says_so_and_a_failed_one_does_not():
    line = ProgressLine(live=False)
    waiting = {**status(0, 0, 0, 0, 0), "state": "OFFLINE"}
    assert "server1 OFFLINE (no job yet: the client starts it) step 0/1" in line.render(
        {"server1": waiting}, {"server1": 1}, elapsed=1.0, now=1.0)
    failed = {**waiting, "errors": ["engine failed to load the model"]}
    assert "server1 OFFLINE step 0/1" in line.render({"server1": failed}, {"server1": 1}, elapsed=2.0, now=2.0)
