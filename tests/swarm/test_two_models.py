"""Two trainable models: two servers on two ports; one episode uses both and each server
gets its own reward (the reference's multi-model training)."""

from __future__ import annotations

import sqlite3

import openai
import pytest

from vibe_rl.swarm import SwarmClient, Task, TrainJob, WorkflowOutput


def test_one_episode_two_servers_two_rewards(make_server):
    s1, s2 = make_server("model_a"), make_server("model_b")
    assert s1.port != s2.port
    c1, c2 = SwarmClient(s1.url), SwarmClient(s2.url)
    c1.auto_sync_train_config_and_start_engine(TrainJob(), verbose=False)
    c2.auto_sync_train_config_and_start_engine(TrainJob(), verbose=False)

    task = Task(task_id="paper-7", main_query="translate")
    ep1, api1 = c1.begin_episode()
    ep2, api2 = c2.begin_episode()
    assert api1.base_url != api2.base_url and api1.api_key != api2.api_key
    llm1 = openai.OpenAI(base_url=api1.base_url, api_key=api1.api_key, max_retries=0)
    llm2 = openai.OpenAI(base_url=api2.base_url, api_key=api2.api_key, max_retries=0)
    draft = llm1.chat.completions.create(model=api1.model, messages=[{"role": "user", "content": "translate"}],
                                         user="translator:agent_1").choices[0].message.content
    check = llm2.chat.completions.create(model=api2.model, messages=[{"role": "user", "content": f"check {draft}"}],
                                         user="checker:agent_2").choices[0].message.content
    llm1.chat.completions.create(model=api1.model, messages=[{"role": "user", "content": f"final {check}"}],
                                 user="translator:agent_3")
    # A key belongs to its own server only.
    cross = openai.OpenAI(base_url=api2.base_url, api_key=api1.api_key, max_retries=0)
    with pytest.raises(openai.AuthenticationError):  # server 2 refuses server 1's key
        cross.chat.completions.create(model=api2.model, messages=[{"role": "user", "content": "x"}])

    c1.end_episode(task, ep1, WorkflowOutput(reward=0.25))
    c2.end_episode(task, ep2, WorkflowOutput(reward=0.75))

    for server, episode, reward, calls, players in (
            (s1, ep1, 0.25, 2, {"translator:agent_1", "translator:agent_3"}), (s2, ep2, 0.75, 1, {"checker:agent_2"})):
        db = sqlite3.connect(f"{server.exp_dir}/swarm.sqlite")
        assert db.execute("SELECT episode_uuid, task_id, reward FROM episodes").fetchall() == [(episode, "paper-7", reward)]
        assert {p for (p,) in db.execute("SELECT player FROM turns")} == players
        assert db.execute("SELECT COUNT(*) FROM turns").fetchone()[0] == calls
    assert c1.get_engine_status()["tasks"] == [{"task_id": "paper-7", "episodes": 1, "reward_mean": 0.25, "reward_std": 0.0}]
    assert c2.get_engine_status()["tasks"] == [{"task_id": "paper-7", "episodes": 1, "reward_mean": 0.75, "reward_std": 0.0}]
    traces = c1.get_traces()["calls"]
    assert [t["player"] for t in traces] == ["translator:agent_1", "translator:agent_3"]
