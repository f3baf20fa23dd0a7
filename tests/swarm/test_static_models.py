"""Static opponents: calls whose `model` names a static model are forwarded (external URL with
its key from an env var, or a frozen local model), recorded as context, and never trained."""

from __future__ import annotations

import json
import sqlite3
import time

import openai
import yaml
from helpers.scripted_api import ScriptedAPI

from vibe_rl.schema import StaticModel
from vibe_rl.swarm import SwarmClient, Task, TrainJob, WorkflowOutput

SECRET = "sk-static-secret-never-print-me"


def test_static_models_are_forwarded_recorded_and_not_trained(make_server, tmp_path):
    with ScriptedAPI(["I am the big opponent"]) as upstream:
        job = TrainJob(static_models=[
            StaticModel(name="qwen-max", base_url_env="OPPONENT_URL", api_key_env="OPPONENT_KEY",
                        upstream_model="qwen-max-2025"),
            StaticModel(name="frozen-opponent")])  # no URL: a frozen local copy of the trainable model
        config = tmp_path / "job.yaml"  # static models come only from the server's own --config
        config.write_text(yaml.safe_dump(job.model_dump(mode="json")))
        server = make_server("static", sets=["train.batch_size=1", "train.grpo_n=2"], extra=["--config", str(config)],
                             env={"OPPONENT_KEY": SECRET, "OPPONENT_URL": upstream.url})
        client = SwarmClient(server.url)
        client.auto_sync_train_config_and_start_engine(job, verbose=False)

        for reward in (0.0, 1.0):
            episode_uuid, api = client.begin_episode()
            llm = openai.OpenAI(base_url=api.base_url, api_key=api.api_key, max_retries=0)
            msgs = [{"role": "user", "content": "describe the word"}]
            mine = llm.chat.completions.create(model=api.model, messages=msgs, user="civilian:p1")
            assert mine.model == "tiny"
            theirs = llm.chat.completions.create(model="qwen-max", messages=msgs, user="spy:p2")
            assert theirs.choices[0].message.content == "I am the big opponent" and theirs.model == "qwen-max"
            stream = llm.chat.completions.create(model="frozen-opponent", messages=msgs, user="spy:p3", stream=True)
            assert [c for c in stream if c.choices and c.choices[0].finish_reason]
            client.end_episode(Task(task_id="game-1"), episode_uuid, WorkflowOutput(reward=reward))

        assert upstream.auth == [f"Bearer {SECRET}"] * 2
        assert {r["model"] for r in upstream.requests} == {"qwen-max-2025"}
        assert not any("context_only" in r for r in upstream.requests)  # vibe-rl's own field never goes upstream
        deadline = time.monotonic() + 60
        while client.get_engine_status()["global_step"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        status = client.get_engine_status()
        assert status["last_update"]["num_samples"] == 2  # one trainable turn per episode; static calls are context

        db = sqlite3.connect(f"{server.exp_dir}/swarm.sqlite")
        rows = db.execute("SELECT player, model, static, length(response_ids) FROM turns ORDER BY ts, idx").fetchall()
        assert {(p, m, s) for p, m, s, _ in rows} == {("civilian:p1", "tiny", 0), ("spy:p2", "qwen-max", 1),
                                                      ("spy:p3", "frozen-opponent", 1)}
        traces = client.get_traces(limit=10)["calls"]
        assert [(t["model"], t["static"]) for t in traces[:3]] == [("tiny", False), ("qwen-max", True),
                                                                  ("frozen-opponent", True)]
        models = [m.id for m in llm.models.list()]
        assert models == ["tiny", "qwen-max", "frozen-opponent"]
        client.close()
    server.stop()
    assert SECRET not in server.output() and SECRET not in json.dumps(status)


def test_ep_end_waits_for_a_call_its_client_gave_up_on(make_server, tmp_path):
    """A player's call that timed out in the client still runs on the server; ep.end waits for it (the server
    answers 409 episode_busy with Retry-After) instead of failing, which made the block abort the episode."""
    import threading

    import pytest

    release = threading.Event()

    def slow(body: dict) -> str:
        release.wait(60)
        return "late answer"

    with ScriptedAPI(slow) as upstream:
        job = TrainJob(static_models=[StaticModel(name="slow-opponent", base_url_env="SLOW_URL",
                                                  api_key_env="SLOW_KEY")])
        config = tmp_path / "job.yaml"
        config.write_text(yaml.safe_dump(job.model_dump(mode="json")))
        server = make_server("busy", extra=["--config", str(config)], env={"SLOW_KEY": "k", "SLOW_URL": upstream.url})
        with SwarmClient(server.url) as swarm:
            swarm.auto_sync_train_config_and_start_engine(job, verbose=False)
            msgs = [{"role": "user", "content": "your move"}]
            with swarm.episode(Task(task_id="busy")) as ep:
                ep.openai().chat.completions.create(model=ep.model, messages=msgs, user="civilian:p1")
                impatient = openai.OpenAI(base_url=ep.base_url, api_key=ep.api_key, max_retries=0, timeout=0.5)
                with pytest.raises(openai.APITimeoutError):
                    impatient.chat.completions.create(model="slow-opponent", messages=msgs, user="spy:p2")
                threading.Timer(1.0, release.set).start()
                result = ep.end(1.0)
            assert result.already_ended is False and result.llm_calls == 2 and result.trainable_turns == 1
