"""Per-update metrics reach the loggers (metrics.jsonl, a TensorBoard event file) and GET /control/updates,
with integer steps; a logger whose package is missing stops the boot with an error naming the extra."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from obs_kit import play_to_step

from vibe_rl.swarm import SwarmClient, TrainJob
from vibe_rl.swarm.protocol import Update

PER_UPDATE = ("reward_mean", "reward_std", "reward_min", "reward_max", "reward_civilian", "all_equal_groups",
              "loss", "kl", "clip_frac", "grad_norm", "episodes", "tokens", "tokens_per_s", "seconds_per_step",
              "discarded_episodes", "aborted_episodes")


def test_three_updates_reach_jsonl_tensorboard_and_the_updates_endpoint(live_server):
    pytest.importorskip("tensorboard", reason="the tensorboard logger needs the 'tensorboard' extra")
    server = live_server(["experiment.loggers=[jsonl,tensorboard]", "train.total_steps=3"])
    with SwarmClient(server.url) as client:
        play_to_step(client, 3)
        updates = client.updates()
        later = client.updates(since=1)
        status = client.get_engine_status()

    assert [u.step for u in updates] == [1, 2, 3] and all(isinstance(u, Update) for u in updates)
    assert [u.step for u in later] == [2, 3]
    assert status["last_update"]["step"] == 3 and isinstance(status["last_update"]["step"], int)
    for u in updates:  # one task of rewards 0 and 1 per update
        assert (u.reward_mean, u.reward_min, u.reward_max, u.episodes) == (0.5, 0.0, 1.0, 2)
        assert u.reward_std == pytest.approx(0.5) and u.reward_civilian == pytest.approx(0.5)
        assert u.all_equal_groups == 0 and u.tokens >= 2 and u.tokens_per_s > 0

    lines = [json.loads(x) for x in (server.exp_dir / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in lines] == [1, 2, 3]
    for row in lines:
        missing = [k for k in PER_UPDATE if k not in row]
        assert not missing, f"metrics.jsonl lacks {missing}: {row}"
        assert isinstance(row["episodes"], int) and isinstance(row["tokens"], int)

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = list((server.exp_dir / "tensorboard").glob("events.out.tfevents.*"))
    assert events, "no TensorBoard event file was written"
    acc = EventAccumulator(str(events[0].parent))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    for key in ("reward_mean", "loss", "grad_norm", "tokens_per_s", "reward_civilian"):
        assert f"train/{key}" in tags, tags
    assert [e.step for e in acc.Scalars("train/reward_mean")] == [1, 2, 3]
    assert [e.value for e in acc.Scalars("train/episodes")] == [2.0, 2.0, 2.0]

    # `vibe-rl swarm plot` draws the curves from metrics.jsonl and prints the reward per step
    png = server.exp_dir.parent / "curves.png"
    done = subprocess.run([sys.executable, "-c", "from vibe_rl.cli import main; main()", "swarm", "plot",
                           str(server.exp_dir), "--out", str(png)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    rows = [line.split() for line in done.stdout.splitlines() if line[:4].strip().isdigit()]
    assert [(r[0], r[1]) for r in rows] == [("1", "0.5000"), ("2", "0.5000"), ("3", "0.5000")], done.stdout


def test_an_unknown_logger_is_refused_with_the_choices(live_server):
    server = live_server(["experiment.loggers=[jsonl,mlflow]"])
    with SwarmClient(server.url) as client, pytest.raises(Exception, match="unknown logger.*mlflow.*tensorboard"):
        client.auto_sync_train_config_and_start_engine(TrainJob(), verbose=False)


def test_the_plot_draws_held_out_eval_rewards_at_the_step_that_served_them(tmp_path):
    from vibe_rl.swarm.observe.curves import draw, eval_points

    updates = [{"step": 1, "reward_mean": 0.1, "reward_std": 0.0, "loss": 0.0, "eval/reward_mean": 0.05},
               {"step": 2, "reward_mean": 0.2, "reward_std": 0.1, "loss": 0.1},
               {"step": 3, "reward_mean": 0.3, "reward_std": 0.1, "loss": 0.1, "eval/reward_mean": 0.25}]
    assert eval_points(updates) == [(0, 0.05), (2, 0.25)]
    assert draw(updates, tmp_path / "c.png").stat().st_size > 1000
