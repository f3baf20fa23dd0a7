"""End to end: a real server with the tiny model, episodes through the official openai SDK
(plain chat, tool calls, streaming), weight updates, and a toy reward that rises."""

from __future__ import annotations

import itertools
import json
import sqlite3
import time

import openai

from vibe_rl.swarm import SwarmClient, Task, TrainJob, WorkflowOutput, run_in_flight

TARGET = "e"
TOOLS = [{"type": "function", "function": {
    "name": "describe_word", "description": "Describe the secret word",
    "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}]


def toy_reward(text: str) -> float:
    """The share of TARGET characters in the answer: the policy can raise it by writing more of them."""
    return text.count(TARGET) / len(text) if text else 0.0


def play(client: SwarmClient, task: Task, kind: str) -> float:
    episode_uuid, api = client.begin_episode(discard_episode_timeout=120)
    llm = openai.OpenAI(base_url=api.base_url, api_key=api.api_key, max_retries=0)
    messages = [{"role": "user", "content": f"Word {task.task_id}: describe it."}]
    if kind == "stream":
        stream = llm.chat.completions.create(model=api.model, messages=messages, stream=True, user="civilian:p1")
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    elif kind == "tools":
        # A conversation with an earlier tool call and its result, rendered through the chat template.
        messages += [{"role": "assistant", "content": None, "tool_calls": [{
                          "id": "call_1", "type": "function",
                          "function": {"name": "describe_word", "arguments": json.dumps({"text": "fruit"})}}]},
                     {"role": "tool", "tool_call_id": "call_1", "content": "ok"}]
        reply = llm.chat.completions.create(model=api.model, messages=messages, tools=TOOLS, user="spy:p2")
        msg = reply.choices[0].message
        text = (msg.content or "") + "".join(c.function.arguments for c in msg.tool_calls or [])
    else:
        reply = llm.chat.completions.create(model=api.model, messages=messages, user="civilian:p3")
        text = reply.choices[0].message.content or ""
    reward = toy_reward(text)
    client.end_episode(task, episode_uuid, WorkflowOutput(reward=reward, metadata={"kind": kind}))
    return reward


def rewards_per_update(exp_dir) -> list[float]:
    db = sqlite3.connect(f"{exp_dir}/swarm.sqlite")
    return [json.loads(m)["reward_mean"] for (m,) in db.execute("SELECT metrics_json FROM updates ORDER BY step")]


def test_training_loop_raises_the_toy_reward(make_server):
    """Trains until the mean reward of the last two updates beats the first two by RISE.

    How fast the tiny model takes off varies with thread timing (batches are sampled
    concurrently), so the loop runs up to MAX_STEPS updates and stops as soon as the reward
    has risen; a broken update never gets there and the test fails."""
    server = make_server("e2e", sets=["train.batch_size=4", "train.save_freq=0"])
    client = SwarmClient(server.url)
    status = client.auto_sync_train_config_and_start_engine(TrainJob(), verbose=False)
    assert status["state"] == "ROLLING" and status["model"] == "tiny"
    grpo_n, tasks_per_step, min_steps, max_steps, rise = 4, 4, 4, 16, 0.05
    kinds = itertools.cycle(["plain", "tools", "stream"])
    rewards: list[float] = []
    for step in range(max_steps):  # on-policy: each batch is sampled with the weights of the previous update
        items = [(Task(task_id=f"seed-{step}-{t}"), next(kinds)) for t in range(tasks_per_step) for _ in range(grpo_n)]
        report = run_in_flight(lambda it: play(client, *it), items, max_in_flight=len(items))
        assert report.failed == 0 and report.retried == 0, report.failures
        deadline = time.monotonic() + 120
        while client.get_engine_status()["global_step"] < step + 1:
            assert time.monotonic() < deadline, client.get_engine_status()
            time.sleep(0.1)
        rewards = rewards_per_update(server.exp_dir)
        if step + 1 >= min_steps and sum(rewards[-2:]) / 2 > sum(rewards[:2]) / 2 + rise:
            break
    steps = step + 1

    status = client.get_engine_status()
    assert status["global_step"] == steps == len(rewards), status
    assert status["errors"] == []
    print("toy reward per update:", rewards)
    first, last = sum(rewards[:2]) / 2, sum(rewards[-2:]) / 2
    assert last > first + rise, f"toy reward did not rise over {len(rewards)} updates: {rewards}"
    db = sqlite3.connect(f"{server.exp_dir}/swarm.sqlite")
    # Every completed episode is on disk with its turns, token ids and player tags.
    (episodes,) = db.execute("SELECT COUNT(*) FROM episodes").fetchone()
    assert episodes == steps * tasks_per_step * grpo_n
    players = {p for (p,) in db.execute("SELECT DISTINCT player FROM turns")}
    assert players == {"civilian:p1", "spy:p2", "civilian:p3"}
    (bad,) = db.execute("SELECT COUNT(*) FROM turns WHERE length(response_ids) = 0").fetchone()
    assert bad == 0
    traces = client.get_traces(limit=5)["calls"]
    assert len(traces) == 5 and all(c["static"] is False and c["model"] == "tiny" for c in traces)
