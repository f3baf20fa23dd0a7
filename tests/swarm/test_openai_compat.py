"""Every row of docs/openai-compat.md through the official openai SDK (sync and async) on a real server."""

from __future__ import annotations

import asyncio
import sqlite3
import time

import openai
import pytest

from tests.swarm.conftest import FAST, Server
from vibe_rl.swarm import SwarmClient, Task, TrainJob

CAP = 300  # rollout.max_tokens of this module's server
HI = [{"role": "user", "content": "Tell me a long story about a cat."}]


@pytest.fixture(scope="module")
def server(tmp_path_factory, tiny_model_dir):
    srv = Server(tmp_path_factory.mktemp("compat") / "exp", [*FAST, f"rollout.max_tokens={CAP}"]).start()
    with SwarmClient(srv.url) as swarm:
        swarm.auto_sync_train_config_and_start_engine(TrainJob(), verbose=False)
    yield srv
    srv.stop()


@pytest.fixture
def ep(server):
    with SwarmClient(server.url) as swarm, swarm.episode(Task(task_id="compat"), timeout=600) as episode:
        yield episode
        if not episode.closed:
            episode.end(0.0)


def sdk(ep) -> openai.OpenAI:
    return openai.OpenAI(base_url=ep.base_url, api_key=ep.api_key, max_retries=0)


def test_chat_basics_sync_and_async(ep):
    reply = sdk(ep).chat.completions.create(model=ep.model, messages=HI, max_tokens=5, seed=3, temperature=0.7,
                                            top_p=0.9, n=2, user="civilian:p1")
    assert len(reply.choices) == 2 and reply.usage.completion_tokens <= 10
    assert reply.usage.model_extra["max_tokens_cap"] == CAP and reply.usage.model_extra["max_tokens_clamped"] is False

    async def go():
        client = openai.AsyncOpenAI(base_url=ep.base_url, api_key=ep.api_key, max_retries=0)
        again = await client.chat.completions.create(model=ep.model, messages=HI, max_tokens=5, seed=3,
                                                     temperature=0.7, top_p=0.9, n=2)
        await client.close()
        return again

    again = asyncio.run(go())
    assert [c.message.content for c in again.choices] == [c.message.content for c in reply.choices]  # seeded


def test_max_tokens_above_the_cap_is_clamped_and_said(ep):
    reply = sdk(ep).chat.completions.create(model=ep.model, messages=HI, max_tokens=CAP + 500, seed=1)
    assert reply.usage.completion_tokens <= CAP
    assert reply.usage.model_extra["max_tokens_clamped"] is True and reply.usage.model_extra["max_tokens_cap"] == CAP


def test_stream_sends_tokens_as_they_are_generated(server, ep):
    """The first content chunk reaches the client before the engine has sampled the last token: the
    server stamps a call's turns when its generation ends, and that stamp comes after the first chunk."""
    kwargs = dict(model=ep.model, messages=HI, max_tokens=CAP, seed=11, temperature=1.0)
    whole = sdk(ep).chat.completions.create(**kwargs).choices[0].message.content
    first_at, parts, finish, usage = None, [], None, None
    for chunk in sdk(ep).chat.completions.create(**kwargs, stream=True, stream_options={"include_usage": True}):
        if chunk.usage:
            usage = chunk.usage
        for choice in chunk.choices:
            if choice.delta.content:
                first_at = first_at or time.time()
                parts.append(choice.delta.content)
            finish = choice.finish_reason or finish
    assert "".join(parts) == whole and finish in ("stop", "length")
    assert len(parts) > 3 and usage.completion_tokens > 3
    ep.end(0.0)
    db = sqlite3.connect(f"{server.exp_dir}/swarm.sqlite")
    (ended_at,) = db.execute("SELECT MAX(ts) FROM turns WHERE episode_uuid=?", (ep.uuid,)).fetchone()
    assert first_at < ended_at


def test_async_stream(ep):
    async def go():
        client = openai.AsyncOpenAI(base_url=ep.base_url, api_key=ep.api_key, max_retries=0)
        stream = await client.chat.completions.create(model=ep.model, messages=HI, max_tokens=20, seed=5,
                                                      stream=True)
        texts = [c.choices[0].delta.content async for c in stream if c.choices and c.choices[0].delta.content]
        await client.close()
        return texts

    assert asyncio.run(go())


def test_logprobs_and_top_logprobs(ep):
    reply = sdk(ep).chat.completions.create(model=ep.model, messages=HI, max_tokens=6, temperature=0.0,
                                            logprobs=True, top_logprobs=3)
    content = reply.choices[0].logprobs.content
    assert len(content) == reply.usage.completion_tokens
    for entry in content:
        assert len(entry.top_logprobs) == 3 and entry.top_logprobs[0].token == entry.token  # greedy
    stream = sdk(ep).chat.completions.create(model=ep.model, messages=HI, max_tokens=6, temperature=0.0,
                                             logprobs=True, top_logprobs=2, stream=True)
    last = [c for c in stream if c.choices and c.choices[0].logprobs][-1]
    assert [e.token for e in last.choices[0].logprobs.content] == [e.token for e in content]
    with pytest.raises(openai.BadRequestError, match="needs logprobs"):
        sdk(ep).chat.completions.create(model=ep.model, messages=HI, max_tokens=2, top_logprobs=2)


@pytest.mark.parametrize("fmt", [{"type": "json_object"},
                                 {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}])
def test_response_format_json_is_refused_with_the_reason(ep, fmt):
    with pytest.raises(openai.BadRequestError, match="constrained decoding") as err:
        sdk(ep).chat.completions.create(model=ep.model, messages=HI, max_tokens=2, response_format=fmt)
    assert err.value.body["param"] == "response_format"
    ok = sdk(ep).chat.completions.create(model=ep.model, messages=HI, max_tokens=2, response_format={"type": "text"})
    assert ok.choices


TOOL = {"type": "function", "function": {"name": "vote", "parameters": {"type": "object", "properties": {}}}}


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "vote"}}])
def test_forced_tool_choice_is_refused(ep, choice):
    with pytest.raises(openai.BadRequestError, match="tool_choice"):
        sdk(ep).chat.completions.create(model=ep.model, messages=HI, max_tokens=2, tools=[TOOL], tool_choice=choice)


@pytest.mark.parametrize("choice", ["auto", "none"])
def test_auto_and_none_tool_choice_are_served(ep, choice):
    assert sdk(ep).chat.completions.create(model=ep.model, messages=HI, max_tokens=2, tools=[TOOL],
                                           tool_choice=choice).choices


@pytest.mark.parametrize("field,value", [("presence_penalty", 0.5), ("frequency_penalty", 0.5),
                                         ("logit_bias", {"10": 5}), ("functions", [TOOL["function"]])])
def test_sampling_changes_the_engine_cannot_honour_are_refused(ep, field, value):
    with pytest.raises(openai.BadRequestError, match=field):
        sdk(ep).chat.completions.create(model=ep.model, messages=HI, max_tokens=2, extra_body={field: value})


def test_stop_strings_and_ignored_fields(ep):
    reply = sdk(ep).chat.completions.create(model=ep.model, messages=HI, max_tokens=40, seed=2, stop=["e"],
                                            store=False, extra_body={"my_field": 1})
    assert "e" not in reply.choices[0].message.content
    assert reply.model_extra["vibe_ignored_fields"] == ["my_field"]  # named, not silently dropped


def test_models_list_and_retrieve(ep):
    client = sdk(ep)
    ids = [m.id for m in client.models.list()]
    assert ep.model in ids and client.models.retrieve(ep.model).id == ep.model
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("no-such-model")


def test_text_completions_with_text_and_token_prompts(server, ep):
    client = sdk(ep)
    text = client.completions.create(model=ep.model, prompt="Once upon a time", max_tokens=5, n=2, seed=4,
                                     logprobs=2)
    assert [c.index for c in text.choices] == [0, 1] and text.usage.completion_tokens <= 10
    assert len(text.choices[0].logprobs.tokens) == len(text.choices[0].logprobs.token_logprobs)
    ids = client.completions.create(model=ep.model, prompt=[[5, 6, 7], [8, 9]], max_tokens=3, seed=4)
    assert len(ids.choices) == 2 and ids.usage.prompt_tokens == 5
    parts = [c.choices[0].text for c in client.completions.create(model=ep.model, prompt="Once", max_tokens=20,
                                                                   seed=9, stream=True) if c.choices]
    whole = client.completions.create(model=ep.model, prompt="Once", max_tokens=20, seed=9).choices[0].text
    assert "".join(parts) == whole
    with pytest.raises(openai.BadRequestError, match="echo"):
        client.completions.create(model=ep.model, prompt="x", max_tokens=2, echo=True)
    with pytest.raises(openai.BadRequestError, match="suffix"):
        client.completions.create(model=ep.model, prompt="x", max_tokens=2, suffix="y")

    async def go():
        a = openai.AsyncOpenAI(base_url=ep.base_url, api_key=ep.api_key, max_retries=0)
        out = await a.completions.create(model=ep.model, prompt="Once", max_tokens=20, seed=9)
        await a.close()
        return out.choices[0].text

    assert asyncio.run(go()) == whole
    result = ep.end(1.0)
    assert result.llm_calls == 5  # every completion call is a recorded call of the episode


# ---- every row of docs/openai-compat.md, through the sync and the async client -------------------------

SCHEMA = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}
OK, REFUSED = "served", "refused"
CHAT_ROWS = [  # (row, kwargs, outcome); kwargs go to chat.completions.create with messages and model
    ("messages+tools", dict(tools=[TOOL]), OK),
    ("tool_choice auto", dict(tools=[TOOL], tool_choice="auto"), OK),
    ("tool_choice none", dict(tools=[TOOL], tool_choice="none"), OK),
    ("tool_choice required", dict(tools=[TOOL], tool_choice="required"), REFUSED),
    ("tool_choice named", dict(tools=[TOOL], tool_choice={"type": "function", "function": {"name": "vote"}}),
     REFUSED),
    ("response_format text", dict(response_format={"type": "text"}), OK),
    ("response_format json_object", dict(response_format={"type": "json_object"}), REFUSED),
    ("response_format json_schema", dict(response_format=SCHEMA), REFUSED),
    ("n", dict(n=2), OK),
    ("temperature/top_p/seed", dict(temperature=0.5, top_p=0.8, seed=7), OK),
    ("max_tokens", dict(max_tokens=3), OK),
    ("max_completion_tokens", dict(max_completion_tokens=3), OK),
    ("stop", dict(stop=["\n", "."]), OK),
    ("logprobs+top_logprobs", dict(logprobs=True, top_logprobs=2), OK),
    ("top_logprobs alone", dict(top_logprobs=2), REFUSED),
    ("user", dict(user="spy:player_3"), OK),
    ("presence_penalty", dict(presence_penalty=1.0), REFUSED),
    ("frequency_penalty", dict(frequency_penalty=1.0), REFUSED),
    ("logit_bias", dict(logit_bias={"5": 1.0}), REFUSED),
    ("functions", dict(extra_body={"functions": [TOOL["function"]]}), REFUSED),
    ("function_call", dict(extra_body={"function_call": "auto"}), REFUSED),
    ("audio", dict(extra_body={"audio": {"voice": "alloy", "format": "wav"}}), REFUSED),
    ("web_search_options", dict(extra_body={"web_search_options": {}}), REFUSED),
    ("modalities audio", dict(extra_body={"modalities": ["text", "audio"]}), REFUSED),
    ("ignored hosted settings", dict(store=False, metadata={"a": "b"}, parallel_tool_calls=True,
                                     extra_body={"service_tier": "auto", "reasoning_effort": "low"}), OK),
]
COMPLETION_ROWS = [
    ("text prompt", dict(prompt="Once"), OK),
    ("token prompt", dict(prompt=[5, 6, 7]), OK),
    ("prompt list", dict(prompt=["a", "b"], n=2), OK),
    ("logprobs", dict(prompt="Once", logprobs=3), OK),
    ("echo", dict(prompt="Once", echo=True), REFUSED),
    ("suffix", dict(prompt="Once", suffix="x"), REFUSED),
    ("best_of", dict(prompt="Once", best_of=3), REFUSED),
    ("penalty", dict(prompt="Once", presence_penalty=1.0), REFUSED),
]


def _check(outcome: str, call) -> None:
    if outcome == REFUSED:
        with pytest.raises(openai.BadRequestError) as err:
            call()
        assert err.value.body["code"] == "unsupported_parameter" and err.value.body["param"]
    else:
        assert call().choices


@pytest.mark.parametrize("row,kwargs,outcome", CHAT_ROWS, ids=[r[0] for r in CHAT_ROWS])
def test_chat_row_sync_and_async(ep, row, kwargs, outcome):
    kwargs = {"max_tokens": 4, **kwargs} if "max_completion_tokens" not in kwargs else kwargs
    _check(outcome, lambda: sdk(ep).chat.completions.create(model=ep.model, messages=HI, **kwargs))

    async def go():
        async with openai.AsyncOpenAI(base_url=ep.base_url, api_key=ep.api_key, max_retries=0) as client:
            return await client.chat.completions.create(model=ep.model, messages=HI, **kwargs)

    _check(outcome, lambda: asyncio.run(go()))


@pytest.mark.parametrize("row,kwargs,outcome", COMPLETION_ROWS, ids=[r[0] for r in COMPLETION_ROWS])
def test_completion_row_sync_and_async(ep, row, kwargs, outcome):
    _check(outcome, lambda: sdk(ep).completions.create(model=ep.model, max_tokens=4, **kwargs))

    async def go():
        async with openai.AsyncOpenAI(base_url=ep.base_url, api_key=ep.api_key, max_retries=0) as client:
            return await client.completions.create(model=ep.model, max_tokens=4, **kwargs)

    _check(outcome, lambda: asyncio.run(go()))


def test_models_rows_async(ep):
    async def go():
        async with openai.AsyncOpenAI(base_url=ep.base_url, api_key=ep.api_key, max_retries=0) as client:
            ids = [m.id async for m in client.models.list()]
            card = await client.models.retrieve(ep.model)
            with pytest.raises(openai.NotFoundError):
                await client.models.retrieve("no-such-model")
            return ids, card

    ids, card = asyncio.run(go())
    assert ep.model in ids and card.id == ep.model
