"""Static opponents from past checkpoints (`source: checkpoint:...`): a real server trains the tiny model to
step 1 and 2 (save_freq 1); static seats then answer with the checkpoint's frozen weights, `latest` follows a
newer checkpoint at the next episode (never mid-episode), and a missing step names the available ones."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import openai
import pytest
import yaml
from pydantic import ValidationError

from vibe_rl.schema import StaticModel
from vibe_rl.swarm import SwarmClient, Task, TrainJob, WorkflowOutput

MSGS = [{"role": "user", "content": "describe the word"}]


def ask(llm: openai.OpenAI, model: str):
    return llm.chat.completions.create(model=model, messages=MSGS, max_tokens=8, temperature=1.0, seed=5,
                                       logprobs=True, user="spy:p2")


def logprobs(reply) -> list[float]:
    return [t.logprob for t in reply.choices[0].logprobs.content]


def close(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(abs(x - y) < 1e-4 for x, y in zip(a, b, strict=True))


def wait_checkpoint(exp_dir: Path, step: int) -> None:
    """Until latest.json names `step` (an event; the deadline only guards a hung server)."""
    marker, deadline = exp_dir / "checkpoints" / "latest.json", time.monotonic() + 120
    while not (marker.is_file() and json.loads(marker.read_text())["step"] >= step):
        assert time.monotonic() < deadline, f"no checkpoint of step {step}"
        time.sleep(0.05)


def play(client: SwarmClient, task: str, reward: float) -> None:
    uuid, api = client.begin_episode()
    llm = openai.OpenAI(base_url=api.base_url, api_key=api.api_key, max_retries=0)
    llm.chat.completions.create(model=api.model, messages=MSGS, user="civilian:p1")
    client.end_episode(Task(task_id=task), uuid, WorkflowOutput(reward=reward))


def test_static_seats_play_frozen_checkpoints(make_server, tmp_path):
    from vibe_rl.schema import EngineConfig, RolloutConfig
    from vibe_rl.swarm.protocol import ChatCompletionRequest
    from vibe_rl.swarm.server.generate import _tokenize, sampling_for
    from vibe_rl.swarm.server.updates import load_frozen

    job = TrainJob(static_models=[
        StaticModel(name="initial"),  # no source: the frozen initial weights
        StaticModel(name="past-1", source="checkpoint:step:1"),
        StaticModel(name="past-latest", source="checkpoint:latest", snapshot_cache=1),
        StaticModel(name="past-pool", source="checkpoint:pool:last-2"),
        StaticModel(name="past-99", source="checkpoint:step:99")])
    config = tmp_path / "job.yaml"
    config.write_text(yaml.safe_dump(job.model_dump(mode="json")))
    server = make_server("ckpt", sets=["train.batch_size=1", "train.grpo_n=2", "train.save_freq=1"],
                         extra=["--config", str(config)])
    client = SwarmClient(server.url)
    client.auto_sync_train_config_and_start_engine(job, verbose=False)
    assert any("no checkpoint in" in n and "initial model plays" in n for n in client.get_engine_status()["notes"])

    # Before any checkpoint: latest is the initial model; a fixed step does not exist yet.
    uuid0, api0 = client.begin_episode()
    llm0 = openai.OpenAI(base_url=api0.base_url, api_key=api0.api_key, max_retries=0)
    first = ask(llm0, "past-latest")
    assert first.system_fingerprint == "v0" and first.model == "past-latest"
    with pytest.raises(openai.NotFoundError, match="no checkpoint exists yet"):
        ask(llm0, "past-1")

    play(client, "t1", 0.0)
    play(client, "t1", 1.0)
    wait_checkpoint(server.exp_dir, 1)

    uuid1, api1 = client.begin_episode()
    llm1 = openai.OpenAI(base_url=api1.base_url, api_key=api1.api_key, max_retries=0)
    step1, initial = ask(llm1, "past-1"), ask(llm1, "initial")
    assert step1.system_fingerprint == "v1" and close(logprobs(initial), logprobs(first))
    assert not close(logprobs(step1), logprobs(initial))  # the step-1 weights, not the initial ones
    latest1 = ask(llm1, "past-latest")
    assert latest1.system_fingerprint == "v1" and close(logprobs(latest1), logprobs(step1))
    assert close(logprobs(ask(llm0, "past-latest")), logprobs(first))  # episode 0 keeps its snapshot
    with pytest.raises(openai.NotFoundError, match=r"available steps: \[1\].*checkpoint:step:1"):
        ask(llm1, "past-99")

    # The same call on a direct load of that checkpoint gives the same logprobs.
    engine = load_frozen(str(server.exp_dir / "checkpoints" / "step_000001" / "model"),
                         EngineConfig(device="cpu", max_model_len=512))
    try:
        req = ChatCompletionRequest(model="x", messages=MSGS, max_tokens=8, temperature=1.0, seed=5)
        _, ids = _tokenize(engine, MSGS, req, None)
        direct = engine.generate(ids, sampling_for(req, RolloutConfig(max_tokens=12), 512 - len(ids)))
    finally:
        engine.close()
    assert close(list(direct.logprobs), logprobs(step1))

    for uuid, api, reward in ((uuid0, api0, 0.0), (uuid1, api1, 1.0)):  # these two train step 2
        llm = openai.OpenAI(base_url=api.base_url, api_key=api.api_key, max_retries=0)
        llm.chat.completions.create(model=api.model, messages=MSGS, user="civilian:p1")
        client.end_episode(Task(task_id="t2"), uuid, WorkflowOutput(reward=reward))
    wait_checkpoint(server.exp_dir, 2)

    with client.episode(Task(task_id="probe")) as ep:
        llm2 = ep.openai()
        latest2 = ask(llm2, "past-latest")  # the newer checkpoint, loaded in place of step 1 (cache of 1)
        assert latest2.system_fingerprint == "v2" and not close(logprobs(latest2), logprobs(step1))
        assert close(logprobs(ask(llm2, "past-1")), logprobs(step1))  # frozen: never updated
        assert ask(llm2, "past-pool").system_fingerprint in ("v1", "v2")
        stream = llm2.chat.completions.create(model="past-1", messages=MSGS, max_tokens=4, stream=True)
        assert [c for c in stream if c.choices and c.choices[0].finish_reason]
        ep.abort()

    # The learner's record against each checkpoint it met, from the episodes' metadata['win'] (by-win-rate pools).
    for won in (True, False, True):
        with client.episode(Task(task_id="record")) as ep:
            ask(ep.openai(), "past-1")
            ep.end(WorkflowOutput(reward=float(won), metadata={"win": won}))
    with client.episode(Task(task_id="record")) as ep:  # no boolean win: not counted
        ask(ep.openai(), "past-1")
        ep.end(WorkflowOutput(reward=0.0, metadata={"winner": "spy"}))
    record = {(o.model, o.step): o for o in client.status().opponents}
    assert (record[("past-1", 1)].games, record[("past-1", 1)].learner_wins) == (3, 2)
    assert record[("past-1", 1)].draw_weight == round((1 - 3 / 5) ** 2, 6)

    db = sqlite3.connect(f"{server.exp_dir}/swarm.sqlite")
    rows = set(db.execute("SELECT model, weight_version FROM turns WHERE static = 1").fetchall())
    assert {("past-latest@initial", 0), ("past-1@step_1", 1), ("past-latest@step_1", 1), ("initial", 0)} <= rows
    client.close()
    server.stop()
    assert "loaded checkpoint step 1" in server.output()


@pytest.mark.parametrize("source", ["checkpoint:stp:1", "checkpoint:step:0", "checkpoint:pool:last-", "latest"])
def test_a_bad_source_names_the_forms(source):
    with pytest.raises(ValidationError, match=r"checkpoint:latest.*checkpoint:step:N.*checkpoint:pool:last-K"):
        StaticModel(name="past", source=source)


def test_a_source_with_an_endpoint_is_refused():
    with pytest.raises(ValidationError, match="drop base_url, or drop source"):
        StaticModel(name="past", source="checkpoint:latest", base_url="http://127.0.0.1:1/v1")


def test_a_lora_checkpoint_plays_its_merged_weights(make_server, tmp_path):
    """With LoRA on, a checkpoint holds an adapter only: the snapshot is the base model with the adapter merged
    in (written once to the checkpoint's merged/), and answers as the trained model did right after that step."""
    job = TrainJob(static_models=[StaticModel(name="past-1", source="checkpoint:step:1")])
    config = tmp_path / "job.yaml"
    config.write_text(yaml.safe_dump(job.model_dump(mode="json")))
    server = make_server("lora-ckpt", sets=["train.batch_size=1", "train.grpo_n=2", "train.save_freq=1",
                                            "model.lora.rank=4", "train.lr=0.05"],
                         extra=["--config", str(config)])
    client = SwarmClient(server.url)
    client.auto_sync_train_config_and_start_engine(job, verbose=False)
    with client.episode(Task(task_id="probe0")) as ep:
        before = ask(ep.openai(), ep.credentials.model)
        ep.abort()
    play(client, "t1", 0.0)
    play(client, "t1", 1.0)
    wait_checkpoint(server.exp_dir, 1)
    step_dir = server.exp_dir / "checkpoints" / "step_000001"
    assert (step_dir / "adapter").is_dir() and not (step_dir / "model").exists()

    with client.episode(Task(task_id="probe1")) as ep:
        llm = ep.openai()
        trained, past = ask(llm, ep.credentials.model), ask(llm, "past-1")  # the server's weights are step 1's
        ep.abort()
    assert past.system_fingerprint == "v1" and (step_dir / "merged" / "config.json").is_file()
    assert not close(logprobs(trained), logprobs(before))  # the update moved the adapter
    assert all(abs(x - y) < 2e-3 for x, y in zip(logprobs(past), logprobs(trained), strict=True))
    client.close()
    server.stop()
