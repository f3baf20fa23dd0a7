"""What a client is told when it gets something wrong: messages name the calls the user wrote
(swarm.episode, ep.end, ep.api_key), a discard is one clear error (no warning on top), and an episode
without any LLM call is a warning on the client and in the server's log (not an error)."""

from __future__ import annotations

import logging
import math
import time

import openai
import pydantic
import pytest

from vibe_rl.errors import ConfigError
from vibe_rl.swarm import SwarmClient, SwarmHTTPError, Task, WorkflowOutput


def counts(swarm: SwarmClient) -> tuple[int, int]:
    pool = swarm.status().pool
    return pool.discarded_episodes, pool.aborted_episodes


def test_a_nan_reward_names_ep_end():
    with pytest.raises(pydantic.ValidationError, match=r"ep\.end\(reward\)"):
        WorkflowOutput(reward=math.nan)


def test_a_discarded_episode_raises_once_with_the_timeout_to_raise(shared_server, caplog):
    with SwarmClient(shared_server.url) as swarm:
        discarded, _ = counts(swarm)
        caplog.set_level(logging.DEBUG, logger="vibe_rl.swarm")
        with pytest.raises(SwarmHTTPError) as info, swarm.episode(Task(task_id="idle"), timeout=0.5) as ep:
            deadline = time.monotonic() + 60
            while counts(swarm)[0] == discarded and time.monotonic() < deadline:
                time.sleep(0.2)
            with pytest.raises(openai.APIStatusError, match=r"swarm\.episode\(task, timeout=\.\.\.\)") as call:
                ep.openai().chat.completions.create(model=ep.model, messages=[{"role": "user", "content": "hi"}])
            assert call.value.status_code == 410
            ep.end(1.0)
        assert info.value.status == 410 and info.value.code == "episode_gone"
        assert "swarm.episode(task, timeout=...)" in str(info.value)
        aborts = [r for r in caplog.records if "abort of episode" in r.getMessage()]
        assert aborts and all(r.levelno == logging.DEBUG for r in aborts), [r.levelname for r in aborts]


def test_an_unknown_key_names_the_episode_api(shared_server):
    with SwarmClient(shared_server.url) as swarm, swarm.episode(Task(task_id="key"), timeout=60) as ep:
        stranger = openai.OpenAI(base_url=ep.base_url, api_key="not-a-key-of-this-server", max_retries=0)
        with pytest.raises(openai.AuthenticationError, match=r"Unknown API key.*swarm\.episode"):
            stranger.chat.completions.create(model=ep.model, messages=[{"role": "user", "content": "hi"}])
        ep.abort()


def test_metadata_next_to_a_workflow_output_is_refused_before_anything_is_sent(shared_server):
    with SwarmClient(shared_server.url) as swarm:
        _, aborted = counts(swarm)
        with pytest.raises(ConfigError, match=r"WorkflowOutput\(reward=r, metadata="), \
                swarm.episode(Task(task_id="both"), timeout=60) as ep:
            ep.end(WorkflowOutput(reward=1.0), {"lost": True})
        assert counts(swarm)[1] == aborted + 1  # nothing was stored: the block aborted it


def test_episodes_without_llm_calls_are_a_warning_on_the_client_and_the_server(shared_server, caplog):
    caplog.set_level(logging.WARNING, logger="vibe_rl.swarm.client")
    with SwarmClient(shared_server.url) as swarm:
        step, group = swarm.status().global_step, swarm.status().pool.grpo_n
        for task_id in ("silent-a", "silent-b"):  # two complete groups: one update (batch_size 2)
            for _ in range(group):
                with swarm.episode(Task(task_id=task_id), timeout=60) as ep:
                    result = ep.end(0.5)
                assert result.llm_calls == 0 and result.warning and "ep.openai()" in result.warning
        with swarm.episode(Task(task_id="silent-eval"), timeout=60, eval=True) as ep:
            assert ep.end(0.5).warning is None  # an eval episode is never trained on anyway
        warned = [r for r in caplog.records if "without any LLM call" in r.getMessage()]
        assert len(warned) == 2 * group
        deadline = time.monotonic() + 120
        while swarm.status().global_step == step and time.monotonic() < deadline:
            time.sleep(0.2)
        update = swarm.updates(since=step)[0]
        assert update.model_dump()["episodes_without_calls"] == 2 * group and update.model_dump()["skipped_empty"]
    log = shared_server.output()
    assert log.count(f"{2 * group} of {2 * group} episodes made no LLM call") == 1, log
