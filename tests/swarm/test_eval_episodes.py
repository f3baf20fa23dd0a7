"""Eval episodes are served by the current weights, logged as eval/* at the next update, never trained on; their
end metadata's bool `win` becomes eval/win_rate with its 95% Wilson interval."""

from __future__ import annotations

import sqlite3

from vibe_rl.swarm import SwarmClient, Task, TrainJob
from vibe_rl.swarm.observe.winrate import wilson


def play(swarm: SwarmClient, task_id: str, reward: float, eval: bool = False, metadata: dict | None = None) -> None:
    with swarm.episode(Task(task_id=task_id), timeout=120, eval=eval) as ep:
        ep.openai().chat.completions.create(model=ep.model, messages=[{"role": "user", "content": "hi"}],
                                            user="civilian:p1")
        ep.end(reward, metadata)


def test_eval_episodes_never_reach_the_pool_or_the_weights(make_server):
    server = make_server("eval")
    with SwarmClient(server.url) as swarm:
        swarm.auto_sync_train_config_and_start_engine(TrainJob(), verbose=False)
        job = swarm.job
        # a full batch of eval episodes: no update. Each reports `win` (won when rewarded), but the first reports
        # none and one an int, which is not a bool: both count in eval/episodes, not in the win rate.
        n = job.train.batch_size * job.train.grpo_n
        for i in range(n):
            meta = {} if i == 0 else {"win": 1} if i == 1 else {"win": bool(i % 2), "winner": "civilian"}
            play(swarm, f"held-out-{i % job.train.batch_size}", reward=float(i % 2), eval=True, metadata=meta)
        status = swarm.status()
        assert status.pool.completed_episodes == 0 and status.global_step == 0 and status.weight_version == 0
        for i in range(job.train.batch_size * job.train.grpo_n):  # now a training batch: one update
            play(swarm, f"train-{i % job.train.batch_size}", reward=float(i % 2))
        updates = server.wait_updates(swarm)
        first = updates[0].model_dump()
        assert first["eval/episodes"] == job.train.batch_size * job.train.grpo_n
        assert first["eval/reward_mean"] == 0.5
        wins = sum(i % 2 for i in range(2, n))
        lo, hi = wilson(wins, n - 2)
        assert (first["eval/win_episodes"], first["eval/wins"]) == (n - 2, wins)
        assert first["eval/win_rate"] == round(wins / (n - 2), 6)
        assert (first["eval/win_rate_lo"], first["eval/win_rate_hi"]) == (round(lo, 6), round(hi, 6))
        assert first["eval/win_rate_lo"] < first["eval/win_rate"] < first["eval/win_rate_hi"]
        assert first["episodes"] == job.train.batch_size * job.train.grpo_n  # the training episodes only
    db = sqlite3.connect(f"{server.exp_dir}/swarm.sqlite")
    rows = dict(db.execute("SELECT status, COUNT(*) FROM episodes WHERE task_id LIKE 'held-out-%' GROUP BY status"))
    assert rows == {"eval": job.train.batch_size * job.train.grpo_n}
