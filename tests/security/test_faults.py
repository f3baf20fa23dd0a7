"""Issue items 6 and 7: consistent state when the disk fills, and the smaller hardening items."""

from __future__ import annotations

import json
import resource
import sqlite3
import subprocess
import time

import httpx
import openai
import pytest

from vibe_rl.swarm import SwarmClient, SwarmHTTPError, Task, TrainJob, WorkflowOutput

from .conftest import FAST, Server, admin, error, rolling


def _wait(client: SwarmClient, predicate, what: str, timeout: float = 120.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        status = client.get_engine_status()
        if predicate(status):
            return status
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {json.dumps(status)[:2000]}"
        time.sleep(0.2)


def _two_episodes(client: SwarmClient, task_id: str = "a") -> None:
    for reward in (0.0, 1.0):
        episode_uuid, api = client.begin_episode()
        llm = openai.OpenAI(base_url=api.base_url, api_key=api.api_key, max_retries=0)
        llm.chat.completions.create(model=api.model, messages=[{"role": "user", "content": "go"}], max_tokens=3)
        client.end_episode(Task(task_id=task_id), episode_uuid, WorkflowOutput(reward=reward))


def _mount_tiny_tmpfs(path) -> bool:
    """A 256 KiB tmpfs (real ENOSPC from the kernel); needs root / CAP_SYS_ADMIN."""
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(path)], capture_output=True)
    return done.returncode == 0


@pytest.mark.parametrize("fault", ["tmpfs", "rlimit"])
def test_item6_a_checkpoint_on_a_full_disk_keeps_step_weights_and_episodes_consistent(tmp_path, tiny_model_dir, fault):
    """tmpfs: the checkpoint dir is a 256 KiB tmpfs, so the save hits ENOSPC. rlimit: the server runs with
    RLIMIT_FSIZE = 512 KiB, so writing the ~3.5 MB weights fails with EFBIG (the same failed-write path,
    available without privileges)."""
    exp = tmp_path / "exp"
    ckpt = exp / "checkpoints"
    ckpt.mkdir(parents=True)
    if fault == "tmpfs" and not _mount_tiny_tmpfs(ckpt):
        pytest.skip("mounting a tmpfs needs root (CAP_SYS_ADMIN); the rlimit variant covers the same path")
    sets = [*FAST, "train.batch_size=1", "train.grpo_n=2", "train.save_freq=1"]
    server = Server(exp, sets)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    try:
        if fault == "rlimit":
            resource.setrlimit(resource.RLIMIT_FSIZE, (512 * 1024, hard))
        try:
            server.start()
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        client = rolling(server)
        _two_episodes(client)
        status = _wait(client, lambda s: s["global_step"] >= 1 and s["state"] == "ROLLING", "the update")
        assert status["global_step"] == status["weight_version"] == 1
        assert status["last_update"]["checkpoint_failed"] == 1
        err = next(e for e in status["errors"] if "Checkpoint of step 1" in e)
        assert str(ckpt) in err and ("ENOSPC" if fault == "tmpfs" else "EFBIG") in err
        assert not (ckpt / "latest.json").exists() and not list(ckpt.glob("step_*"))
        rows = sqlite3.connect(exp / "swarm.sqlite").execute("SELECT status, trained_step FROM episodes").fetchall()
        assert rows == [("trained", 1), ("trained", 1)]  # not 'failed'
        # the server keeps serving; after a crash and restart the episodes of the lost step are trained again
        _two_episodes(client, "b")
        _wait(client, lambda s: s["global_step"] >= 2, "the second update")
        client.close()
        server.kill()
    finally:
        server.stop()
        if fault == "tmpfs":
            subprocess.run(["umount", str(ckpt)], capture_output=True)
    restarted = Server(exp, sets).start()
    try:
        client = rolling(restarted)
        status = _wait(client, lambda s: s["global_step"] >= 2 and s["state"] == "ROLLING", "retraining")
        assert any("recovered 4 completed but untrained episodes" in n for n in status["notes"])
        assert json.loads((ckpt / "latest.json").read_text())["step"] == 2  # this time the disk had room
        client.close()
    finally:
        restarted.stop()


def test_item7_malformed_input_gets_400_not_500(server):
    url, headers = server.url, admin(server.url)
    with SwarmClient(url) as client:
        episode_uuid, api = client.begin_episode()
    llm = openai.OpenAI(base_url=api.base_url, api_key=api.api_key, max_retries=0)
    for calls in ([{"id": "c1", "type": "function", "function": "not-an-object"}],
                  [{"id": "c1", "type": "function", "function": {"name": ["x"], "arguments": [1, 2]}}]):
        with pytest.raises(openai.BadRequestError):
            llm.chat.completions.create(model=api.model, messages=[
                {"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": calls},
                {"role": "tool", "tool_call_id": "c1", "content": "ok"}])
    deep = b"[" * 100_000 + b"]" * 100_000
    for path in ("/control/start", "/episode/end", "/episode/begin"):
        err = error(httpx.post(url + path, content=deep, headers={**headers, "content-type": "application/json"}), 400)
        assert err["code"] == "invalid_json", path
    for raw in (b'{"discard_episode_timeout": Infinity}', b'{"discard_episode_timeout": 1e12}'):
        err = error(httpx.post(url + "/episode/begin", content=raw, headers={**headers,
                                                                            "content-type": "application/json"}), 400)
        assert err["param"] == "discard_episode_timeout"
    end = {"episode_uuid": episode_uuid, "output": {"reward": 1.0}}
    err = error(httpx.post(url + "/episode/end", headers=headers, json={**end, "task": {"task_id": "t" * 300}}), 400)
    assert err["code"] == "task_id_too_long"
    err = error(httpx.post(url + "/episode/end", headers=headers, json={
        **end, "task": {"task_id": "t", "metadata": {"blob": "x" * 300_000}}}), 400)
    assert err["code"] == "metadata_too_large"
    with SwarmClient(url) as client:
        assert client.end_episode(Task(task_id="t"), episode_uuid, WorkflowOutput(reward=1.0))["already_ended"] is False
        assert client.get_engine_status()["errors"] == []


def test_item7_an_end_retried_after_a_restart_waits_for_the_engine(make_server):
    server = make_server("restart")
    client = rolling(server)
    episode_uuid, _ = client.begin_episode()
    client.end_episode(Task(task_id="t"), episode_uuid, WorkflowOutput(reward=1.0))  # stored; pretend the answer was lost
    server.kill()
    server.start()  # same port, same experiment dir, same token; OFFLINE until a client syncs
    with pytest.raises(SwarmHTTPError) as info:
        client.end_episode(Task(task_id="t"), episode_uuid, WorkflowOutput(reward=1.0))
    assert info.value.status == 503 and info.value.code == "engine_offline"
    client.auto_sync_train_config_and_start_engine(TrainJob(), verbose=False)
    assert client.end_episode(Task(task_id="t"), episode_uuid, WorkflowOutput(reward=1.0))["already_ended"] is True
    client.close()


def test_item7_incomplete_groups_expire_with_a_count(make_server):
    server = make_server("ttl", extra=["--incomplete-group-ttl", "1"])
    client = rolling(server)
    episode_uuid, _ = client.begin_episode()
    client.end_episode(Task(task_id="lonely"), episode_uuid, WorkflowOutput(reward=1.0))  # 1 of grpo_n=4, then silence
    status = _wait(client, lambda s: s["pool"]["expired_episodes"] == 1, "the stale group to expire", timeout=60)
    assert status["pool"]["completed_episodes"] == 0 and status["pool"]["incomplete_tasks"] == 0
    assert any("did their clients die?" in n for n in status["notes"])
    db = sqlite3.connect(server.exp_dir / "swarm.sqlite")
    assert db.execute("SELECT status FROM episodes").fetchall() == [("expired",)]
    client.close()
