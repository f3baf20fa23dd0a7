"""A swarm server with `model.engine: vllm` serves the openai SDK and reaches global step 1 (the vLLM tier:
bash scripts/test-vllm.sh)."""

from __future__ import annotations

import importlib.util

import openai
import pytest

from vibe_rl.swarm import SwarmClient, Task, TrainJob, WorkflowOutput

pytestmark = [pytest.mark.vllm, pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None,
    reason="vLLM is not installed here (it pins its own torch and transformers): run bash scripts/test-vllm.sh")]


def test_a_vllm_server_reaches_global_step_1_through_the_openai_sdk(make_server):
    server = make_server("vllm", sets=["train.batch_size=1", "train.grpo_n=2", "train.save_freq=1"])
    client = SwarmClient(server.url)
    client.auto_sync_train_config_and_start_engine(TrainJob(model={"path": "tiny", "engine": "vllm"}), verbose=False)
    status = client.get_engine_status()
    assert status["state"] == "ROLLING" and status["job"]["model"]["engine"] == "vllm", status
    msgs = [{"role": "user", "content": "Describe the word apple."}]
    for reward in (0.0, 1.0):  # the second end fills the pool and starts update 1
        episode_uuid, api = client.begin_episode()
        llm = openai.OpenAI(base_url=api.base_url, api_key=api.api_key, max_retries=0)
        reply = llm.chat.completions.create(model=api.model, messages=msgs, max_tokens=6, logprobs=True,
                                            top_logprobs=2)
        content = reply.choices[0].logprobs.content
        assert reply.system_fingerprint == "v0" and 0 < len(content) <= 6
        assert all(lp.logprob <= 0 and len(lp.top_logprobs) == 2 for lp in content)
        streamed = llm.chat.completions.create(model=api.model, messages=msgs, max_tokens=5, stream=True)
        assert sum(len(c.choices[0].delta.content or "") for c in streamed if c.choices) > 0
        client.end_episode(Task(task_id="apple"), episode_uuid, WorkflowOutput(reward=reward))
    server.wait_updates(client)  # the update runs in the background
    episode_uuid, api = client.begin_episode()
    llm = openai.OpenAI(base_url=api.base_url, api_key=api.api_key, max_retries=0)
    assert llm.chat.completions.create(model=api.model, messages=msgs, max_tokens=4).system_fingerprint == "v1"
    client.abort_episode(episode_uuid)
    status = client.get_engine_status()
    assert status["global_step"] == 1 and not status["errors"], status
    assert (server.exp_dir / "checkpoints" / "step_000001").is_dir()
