"""Crash: SIGKILL the server mid-run, restart it on the same experiment dir. It resumes at the
last checkpoint, and completed episodes that the resumed weights never learned from are
trained on (none is silently lost)."""

from __future__ import annotations

import sqlite3
import time

import openai
import pytest

from vibe_rl.swarm import SwarmClient, Task, TrainJob, WorkflowOutput, run_in_flight


def play(client: SwarmClient, task_id: str, reward: float) -> None:
    episode_uuid, api = client.begin_episode()
    llm = openai.OpenAI(base_url=api.base_url, api_key=api.api_key, max_retries=0)
    llm.chat.completions.create(model=api.model, messages=[{"role": "user", "content": task_id}], max_tokens=4)
    client.end_episode(Task(task_id=task_id), episode_uuid, WorkflowOutput(reward=reward))


def episodes(client: SwarmClient, tasks: list[str], per_task: int = 4) -> None:
    items = [(t, float(i % 2)) for t in tasks for i in range(per_task)]
    report = run_in_flight(lambda it: play(client, *it), items, max_in_flight=8)
    assert report.failed == 0, report.failures


def wait_step(client: SwarmClient, step: int) -> dict:
    deadline = time.monotonic() + 120
    while True:
        status = client.get_engine_status()
        if status["global_step"] >= step and status["state"] == "ROLLING":
            return status
        assert time.monotonic() < deadline, status
        time.sleep(0.1)


def statuses(exp_dir) -> dict[str, int]:
    db = sqlite3.connect(f"{exp_dir}/swarm.sqlite")
    return dict(db.execute("SELECT status, COUNT(*) FROM episodes GROUP BY status").fetchall())


def test_sigkill_then_resume_from_checkpoint_and_train_untrained_episodes(make_server):
    server = make_server("crash", sets=["train.save_freq=2"])
    client = SwarmClient(server.url)
    client.auto_sync_train_config_and_start_engine(TrainJob(), verbose=False)
    episodes(client, ["a", "b"])
    wait_step(client, 1)
    episodes(client, ["c", "d"])
    wait_step(client, 2)  # checkpoint step_000002
    episodes(client, ["e", "f"])
    wait_step(client, 3)  # trained, but no checkpoint: step 3's weights die with the process
    episodes(client, ["g"])  # 4 completed, untrained
    episodes(client, ["h"], per_task=1)  # 1 completed, untrained
    running, api = client.begin_episode()  # one running episode at the moment of the crash
    assert (server.exp_dir / "checkpoints" / "step_000002").is_dir()
    assert statuses(server.exp_dir) == {"trained": 24, "completed": 5}

    server.kill()
    server.start()  # same port, same experiment dir
    status = client.auto_sync_train_config_and_start_engine(TrainJob(), verbose=False)
    notes = " ".join(status["notes"])
    assert "resumed from checkpoint" in notes and "global step 2" in notes, notes
    assert "recovered 13 completed but untrained episodes" in notes, notes

    # Step 3's 8 episodes are retrained as the new step 3; g and h wait in the pool.
    status = wait_step(client, 3)
    assert status["pool"]["completed_episodes"] == 5, status["pool"]
    assert {t["task_id"]: t["episodes"] for t in status["tasks"]} == {"g": 4, "h": 1}

    # The episode that was running at the crash is gone with the old process: a clear 401.
    llm = openai.OpenAI(base_url=api.base_url, api_key=api.api_key, max_retries=0)
    with pytest.raises(openai.AuthenticationError):  # a key of the killed server no longer works
        llm.chat.completions.create(model=api.model, messages=[{"role": "user", "content": "hi"}])

    episodes(client, ["h"], per_task=3)
    wait_step(client, 4)
    assert statuses(server.exp_dir) == {"trained": 32}
    assert client.get_engine_status()["errors"] == []
    del running
