"""The eval win rate with its 95% Wilson interval: the interval itself, then a real server whose eval episodes
report `win`, read back by `vibe-rl swarm plot`, overwatch and the run report."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time

import openai
import pytest

from vibe_rl.swarm import SwarmClient, Task, TrainJob, WorkflowOutput
from vibe_rl.swarm.observe import winrate
from vibe_rl.swarm.observe.curves import draw, eval_table, eval_win_points


def test_wilson_matches_the_published_values():
    # Newcombe (1998), "Two-sided confidence intervals for the single proportion", Table I, method 3 (Wilson)
    for (k, n), want in {(81, 263): [0.2553, 0.3662], (15, 148): [0.0624, 0.1605], (0, 20): [0.0, 0.1611],
                         (1, 29): [0.0061, 0.1718]}.items():
        assert [round(x, 4) for x in winrate.wilson(k, n)] == want
    assert [round(x, 4) for x in winrate.wilson(0, 10)] == [0.0, 0.2775]
    assert [round(x, 4) for x in winrate.wilson(5, 10)] == [0.2366, 0.7634]
    assert [round(x, 4) for x in winrate.wilson(10, 10)] == [0.7225, 1.0]


def test_wilson_approaches_the_normal_interval_for_many_episodes_and_stays_in_0_1():
    lo, hi = winrate.wilson(300, 1000)
    half = 1.959964 * math.sqrt(0.3 * 0.7 / 1000)
    assert abs(lo - (0.3 - half)) < 1e-3 and abs(hi - (0.3 + half)) < 1e-3
    for n in (1, 2, 7):
        for k in range(n + 1):
            lo, hi = winrate.wilson(k, n)
            assert 0.0 <= lo <= k / n <= hi <= 1.0
    with pytest.raises(ValueError, match="at least one episode"):
        winrate.wilson(0, 0)
    with pytest.raises(ValueError, match="wins must lie"):
        winrate.wilson(3, 2)


def test_only_a_bool_win_counts():
    assert winrate.win_of({"win": True}) is True and winrate.win_of({"win": False}) is False
    assert [winrate.win_of(m) for m in ({"win": 1}, {"win": "true"}, {}, None)] == [None] * 4
    assert winrate.eval_metrics([], []) == {}
    only_rewards = winrate.eval_metrics([1.0, 0.0], [None, None])
    assert only_rewards == {"eval/episodes": 2, "eval/reward_mean": 0.5}
    out = winrate.eval_metrics([1.0, 0.0, 1.0, 0.0], [True, False, True, None])
    lo, hi = winrate.wilson(2, 3)
    assert out == {"eval/episodes": 4, "eval/reward_mean": 0.5, "eval/wins": 2, "eval/win_episodes": 3,
                   "eval/win_rate": round(2 / 3, 6), "eval/win_rate_lo": round(lo, 6),
                   "eval/win_rate_hi": round(hi, 6)}


def test_the_plot_and_the_report_read_the_win_rate(tmp_path):
    from vibe_rl.autopilot.report import RunReport, eval_win_rates

    updates = [{"step": 1, "reward_mean": 0.1, "reward_std": 0.0, "loss": 0.0,
                **winrate.eval_metrics([1.0, 0.0], [True, False])},
               {"step": 2, "reward_mean": 0.2, "reward_std": 0.1, "loss": 0.1},
               {"step": 3, "reward_mean": 0.3, "reward_std": 0.1, "loss": 0.1,
                **winrate.eval_metrics([1.0] * 4, [True, True, True, False])}]
    points = eval_win_points(updates)
    assert [(p[0], p[1], p[4]) for p in points] == [(0, 0.5, 2), (2, 0.75, 4)]
    assert points[1][2] == round(winrate.wilson(3, 4)[0], 6)
    assert "[0.301, 0.954]" in eval_table(updates).splitlines()[2]
    assert draw(updates, tmp_path / "c.png").stat().st_size > 1000
    assert eval_table(updates[1:2]) == ""
    rates = eval_win_rates({"server1": updates, "server2": updates[1:2]})
    assert rates == {"server1": "0.750 [0.301, 0.954] over 4 eval episodes (weights of step 2)"}
    report = RunReport("p", "agent_roll", 3, outcome="success", global_step=3, eval_win_rates=rates)
    assert "  server1 eval win rate: 0.750 [0.301, 0.954] over 4 eval episodes (weights of step 2)" in report.render()


def _episode(client: SwarmClient, task_id: str, reward: float, kind: str, metadata: dict) -> None:
    episode_uuid, api = client.begin_episode(discard_episode_timeout=600, kind=kind)
    llm = openai.OpenAI(base_url=api.base_url, api_key=api.api_key, max_retries=2)
    llm.chat.completions.create(model=api.model, messages=[{"role": "user", "content": f"task {task_id}"}],
                                user="civilian:player_1")
    client.end_episode(Task(task_id=task_id), episode_uuid, WorkflowOutput(reward=reward, metadata=metadata))


def test_a_real_server_logs_the_eval_win_rate_and_plot_and_overwatch_show_it(live_server):
    server = live_server()
    cli = [sys.executable, "-c", "from vibe_rl.cli import main; main()"]
    with SwarmClient(server.url) as client:
        client.auto_sync_train_config_and_start_engine(TrainJob(), verbose=False)
        for i, win in enumerate([True, True, False, True, None]):  # the last reports no win: not in the rate
            _episode(client, f"held-out-{i}", float(bool(win)), "eval", {} if win is None else {"win": win})
        for reward in (0.0, 1.0):  # one training group: one update (batch_size 1, grpo_n 2)
            _episode(client, "train-1", reward, "train", {})
        updates = []
        for _ in range(600):  # the update runs in the background
            updates = client.updates()
            if updates:
                break
            time.sleep(0.5)
        first = updates[0].model_dump()
        lo, hi = winrate.wilson(3, 4)
        assert (first["eval/episodes"], first["eval/win_episodes"], first["eval/wins"]) == (5, 4, 3)
        assert (first["eval/win_rate"], first["eval/win_rate_lo"], first["eval/win_rate_hi"]) == (
            0.75, round(lo, 6), round(hi, 6))
        watch = subprocess.run([*cli, "swarm", "overwatch", "--url", server.url, "--once"], capture_output=True,
                               text=True, timeout=120, env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"})
    assert watch.returncode == 0, watch.stderr
    assert "eval win rate" in watch.stdout and "latest 0.750 [0.301, 0.954] over 4 eval episodes" in watch.stdout
    png = server.exp_dir.parent / "curves.png"
    plot = subprocess.run([*cli, "swarm", "plot", str(server.exp_dir), "--out", str(png)], capture_output=True,
                          text=True, timeout=120)
    assert plot.returncode == 0, plot.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    row = next(line for line in plot.stdout.splitlines() if "[0.301, 0.954]" in line)
    assert row.split()[:2] == ["0", "0.750"] and row.split()[-1] == "4", plot.stdout
