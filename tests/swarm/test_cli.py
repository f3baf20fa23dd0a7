"""`vibe-rl swarm start --config FILE --boot`, an empty /control/start, `swarm status` and `swarm stop`."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx

from .conftest import Server, admin

CLI = [sys.executable, "-c", "from vibe_rl.cli import main; main()", "swarm"]


def test_start_with_config_and_boot_then_status_and_stop(tmp_path, tiny_model_dir):
    job = tmp_path / "job.yaml"
    job.write_text("model:\n  path: tiny\n  max_model_len: 256\ntrain:\n  batch_size: 3\n  grpo_n: 2\n"
                   "rollout:\n  max_tokens: 5\n")
    server = Server(tmp_path / "exp", extra=["--config", str(job), "--boot"]).start()
    try:
        deadline = time.monotonic() + 120
        while httpx.get(server.url + "/control/status", headers=admin(server.url)).json()["state"] != "ROLLING":
            assert time.monotonic() < deadline, server.output()
            time.sleep(0.2)
        out = subprocess.run([*CLI, "status", "--url", server.url], capture_output=True, text=True, timeout=60)
        status = json.loads(out.stdout)
        assert status["pool"]["target_tasks"] == 3 and status["pool"]["grpo_n"] == 2
        # An empty start with the same job is idempotent; a different job is refused while it runs.
        assert httpx.post(server.url + "/control/start", headers=admin(server.url)).json()["state"] == "ROLLING"
        other = httpx.post(server.url + "/control/start", json={"train": {"batch_size": 9}}, headers=admin(server.url))
        assert other.status_code == 409 and other.json()["error"]["code"] == "engine_running"
        out = subprocess.run([*CLI, "stop", "--url", server.url], capture_output=True, text=True, timeout=60)
        assert json.loads(out.stdout)["state"] == "OFFLINE"
        begin = httpx.post(server.url + "/episode/begin", json={}, headers=admin(server.url))
        assert begin.status_code == 503 and "auto_sync_train_config_and_start_engine" in begin.json()["error"]["message"]
    finally:
        server.stop()


def test_begin_episode_waits_while_the_engine_boots(make_server):
    from vibe_rl.swarm import SwarmClient, TrainJob

    server = make_server("boot")
    client = SwarmClient(server.url)
    status = client.auto_sync_train_config_and_start_engine(TrainJob(), wait=False)
    assert status["state"] == "BOOTING"
    episode_uuid, api = client.begin_episode()  # answered 429 + Retry-After until ROLLING; the client waits
    assert api.api_key and client.get_engine_status()["state"] == "ROLLING"
    client.abort_episode(episode_uuid)


def test_a_stopped_engine_reports_no_step_of_the_job_it_ran(make_server):
    """After a stop, status must not show the old job's step: a raw client that starts another job and polls
    `global_step < total_steps` while it boots would otherwise stop at once."""
    from vibe_rl.swarm import SwarmClient, Task, TrainJob

    server = make_server("stale", sets=["train.total_steps=1"])
    with SwarmClient(server.url) as client:
        client.auto_sync_train_config_and_start_engine(TrainJob(), verbose=False)
        for task_id in ("a", "b"):
            for k in range(client.job.train.grpo_n):
                with client.episode(Task(task_id=task_id)) as ep:
                    ep.openai().chat.completions.create(model=ep.model, messages=[{"role": "user", "content": "x"}])
                    ep.end(float(k))
        deadline = time.monotonic() + 120
        while client.status().global_step < 1:
            assert time.monotonic() < deadline, server.output()
            time.sleep(0.2)
        stopped = client.stop_engine()
        assert stopped["state"] == "OFFLINE" and stopped["global_step"] == 1  # the stop answer says where it ended
        status = client.status()
        assert status.global_step == 0 and status.last_update is None and status.job is None
