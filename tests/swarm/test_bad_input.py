"""Bad input: each is a clear 4xx in OpenAI's error envelope, and the server keeps serving."""

from __future__ import annotations

import math
import time

import httpx
import openai
import pydantic
import pytest

from vibe_rl.swarm import SwarmClient, SwarmHTTPError, Task, WorkflowOutput

from .conftest import admin


@pytest.fixture(scope="module")
def client(shared_server):
    with SwarmClient(shared_server.url) as c:
        yield c


def envelope(resp: httpx.Response, status: int) -> dict:
    assert resp.status_code == status, resp.text
    err = resp.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    return err


def begin(client):
    episode_uuid, api = client.begin_episode()
    return episode_uuid, api, openai.OpenAI(base_url=api.base_url, api_key=api.api_key, max_retries=0)


def end_raw(url, episode_uuid, task_id="t", reward=1.0, raw: str | None = None):
    if raw is not None:
        return httpx.post(url + "/episode/end", content=raw, headers={"content-type": "application/json", **admin(url)})
    return httpx.post(url + "/episode/end", json={"episode_uuid": episode_uuid, "task": {"task_id": task_id},
                                                  "output": {"reward": reward}}, headers=admin(url))


def test_empty_task_id_is_refused_with_the_grpo_explanation(shared_server, client):
    episode_uuid, _, _ = begin(client)
    for task_id in ("", "   "):
        err = envelope(end_raw(shared_server.url, episode_uuid, task_id=task_id), 400)
        assert "GRPO" in err["message"] and "task_id" in err["message"] and err["param"] == "task.task_id"
    with pytest.raises(pydantic.ValidationError, match="GRPO"):
        client.end_episode(Task(task_id=""), episode_uuid, WorkflowOutput(reward=1.0))
    # The episode is still open: a correct end works.
    assert client.end_episode(Task(task_id="ok"), episode_uuid, WorkflowOutput(reward=1.0))["already_ended"] is False


@pytest.mark.parametrize("reward", ["NaN", "Infinity", "null", '"high"', "true"])
def test_reward_must_be_a_finite_number(shared_server, client, reward):
    episode_uuid, _, _ = begin(client)
    raw = f'{{"episode_uuid": "{episode_uuid}", "task": {{"task_id": "t"}}, "output": {{"reward": {reward}}}}}'
    err = envelope(end_raw(shared_server.url, None, raw=raw), 400)
    assert "reward" in err["message"] and err["param"] == "output.reward"
    with pytest.raises(pydantic.ValidationError):
        WorkflowOutput(reward=math.nan)
    client.abort_episode(episode_uuid)


def test_unknown_key_unknown_model_and_long_prompt(shared_server, client):
    episode_uuid, api, llm = begin(client)
    stranger = openai.OpenAI(base_url=api.base_url, api_key="not-a-key", max_retries=0)
    with pytest.raises(openai.AuthenticationError, match="Unknown API key"):
        stranger.chat.completions.create(model=api.model, messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.NotFoundError, match="does not exist") as info:
        llm.chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "hi"}])
    assert info.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError, match="maximum context length") as info:
        llm.chat.completions.create(model=api.model, messages=[{"role": "user", "content": "word " * 3000}])
    assert info.value.code == "context_length_exceeded"
    # The episode still works after its bad calls.
    reply = llm.chat.completions.create(model=api.model, messages=[{"role": "user", "content": "hi"}], max_tokens=2)
    assert reply.choices[0].finish_reason in ("stop", "length")
    assert client.end_episode(Task(task_id="t"), episode_uuid, WorkflowOutput(reward=0.5))["llm_calls"] == 1


def test_malformed_json_and_unknown_routes(shared_server, client):
    url = shared_server.url
    episode_uuid, api, _ = begin(client)  # a body is read only with a credential (issue 25 item 5)
    err = envelope(httpx.post(url + "/v1/chat/completions", content=b"{not json",
                              headers={"content-type": "application/json", "authorization": f"Bearer {api.api_key}"}),
                   400)
    assert "Malformed JSON" in err["message"]
    client.abort_episode(episode_uuid)
    err = envelope(end_raw(url, None, raw='{"episode_uuid": '), 400)
    assert "Malformed JSON" in err["message"]
    err = envelope(httpx.post(url + "/episode/begin", content=b"[1,",
                              headers={"content-type": "application/json", **admin(url)}), 400)
    assert "Malformed JSON" in err["message"]
    err = envelope(httpx.post(url + "/episode/begin", json={"discard_timeout": 5}, headers=admin(url)), 400)
    assert "discard_timeout" in err["message"]
    envelope(httpx.get(url + "/v1/nothing", headers=admin(url)), 404)
    envelope(httpx.get(url + "/episode/begin", headers=admin(url)), 405)
    _, api, llm = begin(client)
    with pytest.raises(openai.BadRequestError, match="messages"):
        llm.chat.completions.create(model=api.model, messages=[])


def test_unknown_ended_and_expired_episodes(shared_server, client):
    url = shared_server.url
    err = envelope(end_raw(url, "no-such-episode"), 404)
    assert err["code"] == "episode_not_found"
    with pytest.raises(SwarmHTTPError) as info:
        client.abort_episode("no-such-episode")
    assert info.value.status == 404

    # A repeated end is idempotent with the same task and reward, and 409 with different ones.
    episode_uuid, _, _ = begin(client)
    assert client.end_episode(Task(task_id="t"), episode_uuid, WorkflowOutput(reward=1.0))["already_ended"] is False
    assert client.end_episode(Task(task_id="t"), episode_uuid, WorkflowOutput(reward=1.0))["already_ended"] is True
    envelope(end_raw(url, episode_uuid, reward=0.0), 409)

    # An idle episode past its discard timeout is discarded and counted; its key stops working (410).
    before = client.get_engine_status()["pool"]["discarded_episodes"]
    episode_uuid, api = client.begin_episode(discard_episode_timeout=0.5)
    llm = openai.OpenAI(base_url=api.base_url, api_key=api.api_key, max_retries=0)
    deadline = time.monotonic() + 30
    while client.get_engine_status()["pool"]["discarded_episodes"] == before:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    with pytest.raises(openai.APIStatusError, match="discarded after") as info:
        llm.chat.completions.create(model=api.model, messages=[{"role": "user", "content": "hi"}])
    assert info.value.status_code == 410
    err = envelope(end_raw(url, episode_uuid), 410)
    assert "discarded" in err["message"]

    # Aborted episodes are gone too.
    episode_uuid, _, _ = begin(client)
    assert client.abort_episode(episode_uuid)["aborted"] is True
    envelope(end_raw(url, episode_uuid), 410)


def test_server_still_serves_after_all_that(shared_server, client):
    assert httpx.get(shared_server.url + "/healthz").json()["ok"] is True
    episode_uuid, api, llm = begin(client)
    reply = llm.chat.completions.create(model=api.model, messages=[{"role": "user", "content": "hello"}],
                                        max_tokens=3, logprobs=True, n=2, seed=7)
    assert len(reply.choices) == 2 and reply.usage.completion_tokens <= 6
    assert all(len(c.logprobs.content) >= 1 for c in reply.choices)
    # rollout.max_tokens (12 here) is the default and the upper bound of a call's max_tokens.
    long = llm.chat.completions.create(model=api.model, messages=[{"role": "user", "content": "go"}],
                                       max_tokens=1000, temperature=1.0, stop=["never-seen"])
    assert long.usage.completion_tokens <= 12
    short = llm.chat.completions.create(model=api.model, messages=[{"role": "user", "content": "go"}],
                                        max_completion_tokens=2, top_p=0.9)
    assert short.usage.completion_tokens <= 2
    models = [m.id for m in llm.models.list()]
    assert models == [api.model]
    assert client.end_episode(Task(task_id="t2"), episode_uuid, WorkflowOutput(reward=0.0))["trainable_turns"] == 4
    assert client.get_engine_status()["errors"] == []


def test_content_parts_tools_and_tool_messages_are_checked(shared_server, client):
    _, api, llm = begin(client)
    user = {"role": "user", "content": "hi"}
    bad = [  # (what a client sends, the code of the 400, the param it names)
        ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/a.png"}}]}]},
         "unsupported_content", "messages[0].content[0]"),
        ({"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]},
         "invalid_request", "messages[0].content[0].text"),
        ({"messages": [user], "tools": [{"type": "function", "function": 5}]}, "invalid_tools", "tools[0]"),
        ({"messages": [user], "tools": [{"type": "function"}]}, "invalid_tools", "tools[0]"),
        ({"messages": [user, {"role": "tool", "tool_call_id": "call_9", "content": "ok"}]},
         "invalid_tool_message", "messages[1]"),
        ({"messages": [user, {"role": "tool", "content": "ok"}]}, "invalid_tool_message", "messages[1].tool_call_id"),
    ]
    for kwargs, code, param in bad:
        with pytest.raises(openai.BadRequestError) as info:
            llm.chat.completions.create(model=api.model, max_tokens=2, **kwargs)
        assert info.value.code == code and info.value.body["param"] == param, info.value.body
    # The OpenAI tool loop as the SDK documents it is served: a call, then its result.
    call = {"id": "call_1", "type": "function", "function": {"name": "vote", "arguments": '{"player": 3}'}}
    tools = [{"type": "function", "function": {"name": "vote", "parameters": {"type": "object"}}}]
    reply = llm.chat.completions.create(model=api.model, max_tokens=2, tools=tools, messages=[
        user, {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "player 3 is out"}])
    assert reply.choices[0].finish_reason in ("stop", "length", "tool_calls")


def test_empty_stop_strings_are_ignored_not_applied_to_the_content(shared_server, client):
    _, api, llm = begin(client)
    ask = dict(model=api.model, messages=[{"role": "user", "content": "go"}], max_tokens=6, temperature=0)
    plain = llm.chat.completions.create(**ask).choices[0].message.content
    assert plain  # the tiny model's greedy answer to "go" is not empty
    for stop in ("", [""]):
        assert llm.chat.completions.create(**ask, stop=stop).choices[0].message.content == plain


def test_completion_prompts_are_checked_before_anything_decodes_them(shared_server, client):
    _, api, llm = begin(client)
    for ids in ([-1], [10**20]):
        with pytest.raises(openai.BadRequestError, match="outside this model's vocabulary") as info:
            llm.completions.create(model=api.model, prompt=ids, max_tokens=1)
        assert info.value.code == "invalid_token_id"
    with pytest.raises(openai.BadRequestError, match="Split the prompts") as info:
        llm.completions.create(model=api.model, prompt=["a"] * 100, n=3, max_tokens=1)
    assert info.value.code == "too_many_choices"
    assert client.get_engine_status()["errors"] == []


def test_huge_numbers_and_the_admin_token_on_model_calls(shared_server, client):
    url = shared_server.url
    episode_uuid, api, _ = begin(client)
    raw = f'{{"episode_uuid": "{episode_uuid}", "task": {{"task_id": "t"}}, "output": {{"reward": 1{"0" * 400}}}}}'
    err = envelope(end_raw(url, None, raw=raw), 400)
    assert err["param"] == "output.reward" and "too large for a float" in err["message"], err
    assert "max_abs_reward" in err["message"]
    resp = httpx.get(url + f"/control/updates?since={10**30}", headers=admin(url))
    assert resp.status_code == 200 and resp.json()["updates"] == []
    admin_llm = openai.OpenAI(base_url=api.base_url, api_key=admin(url)["authorization"].split()[1], max_retries=0)
    with pytest.raises(openai.AuthenticationError, match="admin token does not call models"):
        admin_llm.chat.completions.create(model=api.model, messages=[{"role": "user", "content": "hi"}])
    # The episode survived all of it, and nothing reached the server's error list.
    assert client.end_episode(Task(task_id="t"), episode_uuid, WorkflowOutput(reward=1.0))["already_ended"] is False
    assert client.get_engine_status()["errors"] == []


def test_control_start_names_unknown_job_fields(shared_server):
    url = shared_server.url
    for body, param in (({"trian": {"lr": 0.1}}, "trian"), ({"train": {"learning_rate": 0.1}}, "train.learning_rate"),
                        ({"job": {"model": {"lora": {"rnak": 8}}}}, "model.lora.rnak")):
        err = envelope(httpx.post(url + "/control/start", json=body, headers=admin(url)), 400)
        assert err["code"] == "invalid_job" and err["param"] == param and "nothing was started" in err["message"]
    err = envelope(httpx.post(url + "/control/start", json=[1], headers=admin(url)), 400)
    assert "JSON object" in err["message"]
    err = envelope(httpx.post(url + "/control/start", json={"model": {"path": 5}}, headers=admin(url)), 400)
    assert err["param"] == "model.path" and "https://" not in err["message"]  # no pydantic boilerplate
    assert httpx.get(url + "/control/status", headers=admin(url)).json()["state"] == "ROLLING"


def test_a_job_dict_with_a_misspelt_field_is_refused_by_the_client(shared_server, client):
    from vibe_rl.errors import ConfigError
    from vibe_rl.schema import TrainJob

    with pytest.raises(ConfigError, match=r"Unknown TrainJob fields: train\.learning_rate, rollout\.max_token"):
        client.auto_sync_train_config_and_start_engine({"train": {"learning_rate": 0.1}, "rollout": {"max_token": 8}})
    # A correct dict is validated and sent: here the job the shared server already runs, so it is a no-op.
    status = client.auto_sync_train_config_and_start_engine(TrainJob().model_dump(mode="json"), verbose=False)
    assert status["state"] in ("ROLLING", "WEIGHT_SYNCING") and isinstance(client.job, TrainJob)
