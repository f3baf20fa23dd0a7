"""During a weight update chat calls wait for the new weights, begin_episode waits, and the
running episodes survive it; --model/--set overrides are announced."""

from __future__ import annotations

import threading

import openai

from vibe_rl.swarm import SwarmClient, Task, TrainJob, WorkflowOutput


def test_calls_during_an_update_wait_and_running_episodes_survive(make_server):
    server = make_server("sync", sets=["train.batch_size=1", "train.grpo_n=2", "train.save_freq=1"])
    client = SwarmClient(server.url)
    status = client.auto_sync_train_config_and_start_engine(TrainJob(model={"path": "/no/such/model"}), verbose=False)
    assert status["model"] == "tiny" and any("--model tiny overrides" in n for n in status["notes"])
    assert "note: --model tiny overrides the synced model.path=/no/such/model" in server.output()

    survivor, api = client.begin_episode(discard_episode_timeout=600)
    llm = openai.OpenAI(base_url=api.base_url, api_key=api.api_key, max_retries=0)
    msgs = [{"role": "user", "content": "hi"}]
    assert llm.chat.completions.create(model=api.model, messages=msgs).system_fingerprint == "v0"

    for reward in (0.0, 1.0):  # the second end fills the pool and starts update 1 (with a checkpoint)
        episode_uuid, other = client.begin_episode()
        openai.OpenAI(base_url=other.base_url, api_key=other.api_key).chat.completions.create(
            model=other.model, messages=[{"role": "user", "content": "x"}], max_tokens=3)
        client.end_episode(Task(task_id="x"), episode_uuid, WorkflowOutput(reward=reward))

    begun: list[str] = []
    waiter = threading.Thread(target=lambda: begun.append(client.begin_episode()[0]))
    waiter.start()
    reply = llm.chat.completions.create(model=api.model, messages=msgs)  # held until the new weights are live
    assert reply.system_fingerprint == "v1"
    waiter.join(timeout=60)
    client.abort_episode(begun[0])
    assert begun and client.get_engine_status()["global_step"] == 1
    assert client.end_episode(Task(task_id="y"), survivor, WorkflowOutput(reward=1.0))["llm_calls"] == 2
    assert (server.exp_dir / "checkpoints" / "step_000001").is_dir()
