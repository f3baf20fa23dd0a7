"""Pure parts of the swarm: pool policies, tool-call parsing and rendering, the in-flight helper,
the light client import, server-side job overrides."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading

import pytest

from vibe_rl.schema import CollectionPolicy, TrainConfig, TrainJob
from vibe_rl.swarm import run_in_flight
from vibe_rl.swarm.server.chat import parse_tool_calls, render_prompt, to_template_messages, trim_stop
from vibe_rl.swarm.server.config import ServerConfig
from vibe_rl.swarm.server.pool import CompletedEpisode, Pool


def pool_with(policy: str, groups: dict[str, list[float]], batch_size: int = 2, grpo_n: int = 2) -> Pool:
    pool = Pool(TrainConfig(policy=CollectionPolicy(policy), batch_size=batch_size, grpo_n=grpo_n))
    for task_id, rewards in groups.items():
        for i, r in enumerate(rewards):
            pool.add(CompletedEpisode(f"{task_id}-{i}", task_id, r))
    return pool


def test_tasks_policy_needs_batch_size_groups_of_grpo_n():
    pool = pool_with("tasks", {"a": [1, 1], "b": [0]})
    assert not pool.ready()
    pool.add(CompletedEpisode("b-1", "b", 1.0))
    assert pool.ready()
    train, dummy = pool.take()
    assert [len(g) for g in train] == [2, 2] and dummy == [] and len(pool) == 0


def test_the_reference_bug_many_episodes_under_one_task_never_triggers():
    pool = pool_with("tasks", {"": [1.0, 0.0] * 70}, batch_size=4, grpo_n=4)
    summary = pool.summary()
    assert not pool.ready()
    assert summary["completed_episodes"] == 140 and summary["completed_tasks"] == 1
    assert summary["avg_episodes_per_task"] == 140.0


def test_non_dummy_policy_counts_only_groups_whose_rewards_differ():
    pool = pool_with("non_dummy_tasks", {"same": [1, 1], "diff": [0, 1]})
    assert pool.summary()["completed_tasks"] == 2 and pool.summary()["completed_non_dummy_tasks"] == 1
    assert not pool.ready()
    pool.add(CompletedEpisode("x-0", "x", 0.0))
    pool.add(CompletedEpisode("x-1", "x", 0.5))
    train, dummy = pool.take()
    assert sorted(g[0].task_id for g in train) == ["diff", "x"] and [g[0].task_id for g in dummy] == ["same"]


def test_episodes_policy_counts_episodes():
    pool = pool_with("episodes", {"a": [1], "b": [0], "c": [1]})
    assert not pool.ready()
    pool.add(CompletedEpisode("d", "d", 0.0))
    assert pool.ready()
    train, _ = pool.take()
    assert sum(len(g) for g in train) == 4


def test_tool_calls_are_parsed_and_broken_blocks_stay_content():
    text = 'Let me look.\n<tool_call>\n{"name": "vote", "arguments": {"player": 3}}\n</tool_call>'
    content, calls = parse_tool_calls(text)
    assert content == "Let me look."
    assert calls[0]["type"] == "function" and calls[0]["function"]["name"] == "vote"
    assert json.loads(calls[0]["function"]["arguments"]) == {"player": 3} and calls[0]["id"].startswith("call_")
    content, calls = parse_tool_calls("<tool_call>{not json}</tool_call>")
    assert calls == [] and content == "<tool_call>{not json}</tool_call>"
    content, calls = parse_tool_calls('<tool_call>{"name": "a", "arguments": {}}</tool_call>'
                                      '<tool_call>{"name": "b", "arguments": {"x": 1}}</tool_call>')
    assert content is None and [c["function"]["name"] for c in calls] == ["a", "b"]
    assert trim_stop("hello STOP world", ["STOP"]) == "hello "


def test_tool_round_trip_through_the_tiny_chat_template(tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    tools = [{"type": "function", "function": {"name": "vote", "parameters": {"type": "object"}}}]
    messages = [{"role": "user", "content": "who is the spy?"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "vote", "arguments": '{"player": 3}'}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "player 3 is out"}]
    ids = render_prompt(tok, messages, tools)
    text = tok.decode(ids)
    assert '"name": "vote"' in text and '<tool_call>\n{"name": "vote", "arguments": {"player": 3}}\n</tool_call>' in text
    assert "<tool_response>\nplayer 3 is out\n</tool_response>" in text and text.endswith("<|im_start|>assistant\n")
    # What the model writes in that format comes back as OpenAI tool_calls.
    _, calls = parse_tool_calls(text.split("<|im_start|>assistant\n")[1].split("<|im_end|>")[0])
    assert calls[0]["function"]["name"] == "vote"
    assert "# Tools" not in tok.decode(render_prompt(tok, messages[:1], tools, tool_choice="none"))
    assert to_template_messages([{"role": "developer", "content": [{"type": "text", "text": "a"}]}]) == [
        {"role": "system", "content": "a"}]


def test_run_in_flight_keeps_n_running_retries_and_reports():
    running, peak, lock = [0], [0], threading.Lock()
    attempts: dict[int, int] = {}

    def work(item: int) -> None:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
            attempts[item] = attempts.get(item, 0) + 1
        try:
            if item % 10 == 3 and attempts[item] == 1:
                raise RuntimeError("flaky once")
            if item == 7:
                raise ValueError("always broken")
        finally:
            with lock:
                running[0] -= 1

    report = run_in_flight(work, itertools.islice(itertools.count(), 40), max_in_flight=4, max_retries=2,
                           backoff=0.01)
    assert report.succeeded == 39 and report.failed == 1 and report.retried == 4 + 2
    assert report.failures[0][0] == 7 and isinstance(report.failures[0][1], ValueError)
    assert peak[0] <= 4 and attempts[7] == 3


def test_run_in_flight_reads_an_infinite_iterable_lazily():
    seen = []
    gen = (seen.append(i) or i for i in itertools.count())
    with pytest.raises(KeyboardInterrupt):
        run_in_flight(lambda i: (_ for _ in ()).throw(KeyboardInterrupt) if i == 20 else None, gen, max_in_flight=3,
                      max_retries=0)
    assert len(seen) < 30


def test_client_package_is_light():
    code = ("import sys, vibe_rl.swarm; heavy = [m for m in ('torch', 'fastapi', 'transformers', 'starlette', "
            "'uvicorn') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_server_overrides_win_over_the_synced_job_and_say_so():
    cfg = ServerConfig(model="tiny", overrides=["train.batch_size=3", "rollout.max_tokens=7"], experiment_dir="/x")
    job, notes = cfg.effective_job(TrainJob.model_validate({"model": {"path": "/models/qwen"},
                                                            "train": {"batch_size": 32}}))
    assert job.model.path == "tiny" and job.train.batch_size == 3 and job.rollout.max_tokens == 7
    assert job.experiment.dir == "/x" and len(notes) == 3 and "/models/qwen" in notes[0]
    assert ServerConfig().effective_job(TrainJob())[1] == []


def test_player_tags_cannot_overwrite_or_flood_the_reward_metrics():
    from vibe_rl.rl.samples import Turn
    from vibe_rl.swarm.observe.metrics import MAX_ROLES, batch_metrics
    from vibe_rl.swarm.server.pool import CompletedEpisode

    def episode(i: int, reward: float, player: str) -> CompletedEpisode:
        return CompletedEpisode(f"e{i}", "t", reward, [Turn([1], [2], [-0.1], player=player)])

    # 'mean:...' is a role named like a statistic: reward_mean stays the mean of all episodes.
    group = [episode(0, 1.0, "mean:player_1"), episode(1, 0.0, "civilian:player_2")]
    out = batch_metrics([group])
    assert out["reward_mean"] == 0.5 and out["reward_role_mean"] == 1.0 and out["reward_civilian"] == 0.0
    # OpenAI's meaning of `user` (one id per end user) must not add a metric per id.
    many = [episode(i, 0.5, f"user-{i}") for i in range(MAX_ROLES + 8)]
    out = batch_metrics([many])
    assert sum(k.startswith("reward_user-") for k in out) == MAX_ROLES and out["roles_not_reported"] == 8


def test_logprobs_of_an_id_past_the_tokenizer_are_listed_not_an_error(tiny_model_dir):
    """A model's embedding is padded past its tokenizer (the sampler can draw a padding row): its logprobs
    entry is an empty token with bytes None, the other entries as OpenAI lists them."""
    from types import SimpleNamespace

    from vibe_rl.engine.loader import load_tokenizer
    from vibe_rl.swarm.server.generate import logprobs_content

    tokenizer = load_tokenizer(tiny_model_dir)
    known, padding = tokenizer.convert_tokens_to_ids("hello") or 0, len(tokenizer) + 3
    gen = SimpleNamespace(token_ids=[known, padding], logprobs=[-0.5, -7.0],
                          top_logprobs=[[(padding, -7.0)], [(known, -0.25)]])
    first, second = logprobs_content(tokenizer, gen)
    assert second == {"token": "", "logprob": -7.0, "bytes": None,
                      "top_logprobs": [{"token": tokenizer.convert_ids_to_tokens(known), "logprob": -0.25,
                                        "bytes": list(tokenizer.convert_ids_to_tokens(known).encode())}]}
    assert first["top_logprobs"] == [{"token": "", "logprob": -7.0, "bytes": None}]
    assert first["bytes"] == list(first["token"].encode()) and first["token"]
