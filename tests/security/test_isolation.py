"""Issue items 3, 4 and 5: one bad request never hurts the others, and bounds hold."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest

from vibe_rl.rl.samples import Turn
from vibe_rl.swarm import SwarmClient, Task, WorkflowOutput
from vibe_rl.swarm.server.pool import CompletedEpisode, Pool, _std
from vibe_rl.swarm.server.updates import build_batch

from .conftest import admin, error

HI = [{"role": "user", "content": "hi"}]


def _episode(server):
    with SwarmClient(server.url) as client:
        episode_uuid, api = client.begin_episode()
    return episode_uuid, api, openai.OpenAI(base_url=api.base_url, api_key=api.api_key, max_retries=0)


def test_item3_an_out_of_range_seed_fails_alone(server):
    episode_uuid, api, llm = _episode(server)
    bad_seeds = (2**64, -(2**63) - 1)

    def call(i: int):
        if i < len(bad_seeds):
            with pytest.raises(openai.BadRequestError) as info:
                llm.chat.completions.create(model=api.model, messages=HI, seed=bad_seeds[i], max_tokens=2)
            return info.value.body["param"]
        return llm.chat.completions.create(model=api.model, messages=HI, seed=i, max_tokens=2).choices[0].finish_reason

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(call, range(40)))
    assert results[:2] == ["seed", "seed"]
    assert all(r in ("stop", "length") for r in results[2:])  # 38 innocent calls all answered
    # the edges of int64 are fine, also with n > 1 (seed + i wraps inside int64)
    reply = llm.chat.completions.create(model=api.model, messages=HI, seed=2**63 - 1, n=2, max_tokens=2)
    assert len(reply.choices) == 2
    with SwarmClient(server.url) as client:
        client.abort_episode(episode_uuid)


def test_item3_an_engine_error_of_one_request_fails_only_that_request(tiny_model_dir):
    """Below the API's validation: the engine retries a failed batch's requests one by one."""
    from vibe_rl.engine import load_engine
    from vibe_rl.engine.base import SamplingParams
    from vibe_rl.schema import EngineConfig

    engine = load_engine(EngineConfig(path="tiny", device="cpu", max_model_len=128), None, trainable=False)
    try:
        prompt = engine.tokenizer.encode("hello there")
        with engine._lock:  # hold the weights: every request below queues, then they run together
            blocker = engine.submit(prompt, SamplingParams(max_tokens=4, seed=1))
            bad = engine.submit(prompt, SamplingParams(max_tokens=4, seed=2**64))  # overflows int64 in the batch
            good = [engine.submit(prompt, SamplingParams(max_tokens=4, seed=i)) for i in range(8)]
        assert blocker.result(timeout=120).token_ids
        assert all(g.result(timeout=120).token_ids for g in good)
        with pytest.raises(Exception, match="(?i)overflow"):
            bad.result(timeout=120)
    finally:
        engine.close()


def test_item4_huge_rewards_are_refused_and_status_survives(server):
    episode_uuid, _, _ = _episode(server)
    for reward in (1e200, -1e7):
        err = error(httpx.post(server.url + "/episode/end", headers=admin(server.url), json={
            "episode_uuid": episode_uuid, "task": {"task_id": "huge"}, "output": {"reward": reward}}), 400)
        assert err["code"] == "reward_out_of_range" and err["param"] == "output.reward"
    with SwarmClient(server.url) as client:
        assert client.end_episode(Task(task_id="huge"), episode_uuid, WorkflowOutput(reward=1e6))["already_ended"] is False
        status = client.get_engine_status()
        assert status["state"] in ("ROLLING", "WEIGHT_SYNCING") and client.wait_until_rolling(timeout=60)


def _ep(task_id: str, reward: float) -> CompletedEpisode:
    turn = Turn(prompt_ids=[1, 2, 3], response_ids=[4, 5], response_logprobs=[-0.5, -0.7], messages=[])
    return CompletedEpisode(f"{task_id}-{reward}", task_id, reward, [turn])


def test_item4_a_bad_group_is_rejected_alone_and_stats_never_overflow():
    """Episodes recovered from an older store may still hold huge rewards: only their group is set aside."""
    bad, good = [_ep("bad", 1e200), _ep("bad", 0.0)], [_ep("good", 1.0), _ep("good", 0.0)]
    batch = build_batch([bad, good])
    assert [g[0].task_id for g in batch.groups] == ["good"] and len(batch.samples) == 2
    assert [(g[0].task_id, "exceeds" in why) for g, why in batch.rejected] == [("bad", True)]
    assert _std([1e200, 0.0]) == pytest.approx(5e199) and _std([1e308, -1e308]) == pytest.approx(1e308)
    from vibe_rl.schema import TrainConfig

    pool = Pool(TrainConfig(batch_size=1, grpo_n=2))
    for ep in bad:
        pool.add(ep)
    assert pool.tasks_table()[0]["reward_std"] == pytest.approx(5e199)


def test_item5_a_huge_body_is_refused_at_once_and_tokenizing_never_blocks_the_server(server):
    episode_uuid, api, llm = _episode(server)
    with pytest.raises(openai.APIStatusError) as info:  # 20 MB: refused while reading the body
        llm.chat.completions.create(model=api.model, messages=[{"role": "user", "content": "x " * 10_000_000}])
    assert info.value.status_code == 413
    # 6 MB (under the cap): rendered and tokenised in a worker thread while /healthz keeps answering
    outcome: dict = {}

    def big_call():
        try:
            llm.chat.completions.create(model=api.model, messages=[{"role": "user", "content": "word " * 1_200_000}])
        except openai.BadRequestError as exc:
            outcome["code"] = exc.code

    thread = threading.Thread(target=big_call)
    thread.start()
    answered_during = 0  # /healthz answers that came back while the big call was still unanswered
    while thread.is_alive():
        assert httpx.get(server.url + "/healthz", timeout=120).json()["ok"]
        answered_during += thread.is_alive()
    thread.join()
    # Counted in events, not seconds: a blocked event loop holds every /healthz until the big call is answered,
    # so at most the one or two sent before the loop blocked (and one in the gap after) come back while the call
    # is open; a free loop answers one after another for the whole call.
    assert outcome["code"] == "context_length_exceeded" and answered_during >= 10, answered_during
    too_many = [{"role": "user", "content": "a"}] * 3000
    with pytest.raises(openai.BadRequestError, match="messages"):
        llm.chat.completions.create(model=api.model, messages=too_many)
    with SwarmClient(server.url) as client:
        client.abort_episode(episode_uuid)
