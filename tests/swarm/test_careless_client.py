"""What a careless client written from the docs alone runs into, on a real server with the openai SDK:
each mistake gets an error that says what was wrong and how to fix it, and nothing is silently lost."""

from __future__ import annotations

import importlib.util
import json
import math
import sqlite3

import httpx
import numpy as np
import openai
import pydantic
import pytest

from tests.swarm.conftest import admin
from vibe_rl.errors import ConfigError
from vibe_rl.swarm import NotAnEpisodeError, SwarmClient, Task, open_episodes

HI = [{"role": "user", "content": "hi"}]


def stored_task(server, uuid: str) -> tuple[dict, float]:
    with sqlite3.connect(server.exp_dir / "swarm.sqlite") as db:
        task_json, reward = db.execute("SELECT task_json, reward FROM episodes WHERE episode_uuid = ?",
                                       (uuid,)).fetchone()
    return json.loads(task_json), reward


def test_an_unknown_model_names_the_model_to_pass_and_where_opponents_come_from(shared_server):
    with SwarmClient(shared_server.url) as swarm, swarm.episode(Task(task_id="model"), timeout=60) as ep:
        with pytest.raises(openai.NotFoundError) as info:
            ep.openai().chat.completions.create(model="gpt-4o", messages=HI)
        message = info.value.body["message"]
        assert f"model={ep.model!r}" in message and "ep.model" in message, message
        assert "--config" in message and "OpenaiBaseUrlAndApiKey" not in message, message
        ep.abort()


def test_a_message_without_content_is_refused_like_openai_does(shared_server):
    with SwarmClient(shared_server.url) as swarm, swarm.episode(Task(task_id="content"), timeout=60) as ep:
        chat = ep.openai().chat.completions
        for messages, index in (([{"role": "user", "content": None}], 0), ([{"role": "user"}], 0),
                                ([*HI, {"role": "assistant", "content": None}, *HI], 1)):
            with pytest.raises(openai.BadRequestError) as info:
                chat.create(model=ep.model, messages=messages)
            assert info.value.body["param"] == f"messages[{index}].content", info.value.body
            assert "needs content" in info.value.body["message"]
        call = {"id": "c1", "type": "function", "function": {"name": "guess", "arguments": "{}"}}
        reply = chat.create(model=ep.model, messages=[*HI, {"role": "assistant", "content": None, "tool_calls": [call]},
                                                      {"role": "tool", "tool_call_id": "c1", "content": "7"}])
        assert reply.choices[0].message.content is not None
        assert ep.end(0.5).llm_calls == 1  # only the served call is recorded


def test_an_unknown_response_format_type_is_named_as_such(shared_server):
    with SwarmClient(shared_server.url) as swarm, swarm.episode(Task(task_id="fmt"), timeout=60) as ep:
        with pytest.raises(openai.BadRequestError) as info:
            ep.openai().chat.completions.create(model=ep.model, messages=HI, response_format={"type": "yaml"})
        assert info.value.body["param"] == "response_format.type" and "unknown type 'yaml'" in info.value.body[
            "message"], info.value.body
        ep.abort()


def test_extra_task_keys_sent_over_http_are_kept_in_metadata(shared_server):
    with SwarmClient(shared_server.url) as swarm:
        uuid, creds = swarm.begin_episode(60)
    openai.OpenAI(base_url=creds.base_url, api_key=creds.api_key).chat.completions.create(model=creds.model,
                                                                                          messages=HI)
    resp = httpx.post(f"{shared_server.url}/episode/end", headers={"authorization": f"Bearer {creds.api_key}"},
                      json={"episode_uuid": uuid, "task": {"task_id": "duel-1", "secret": 17, "metadata": {"k": 1}},
                            "output": {"reward": 0.25}})
    assert resp.status_code == 200, resp.text
    assert set(resp.json()) == {"episode_uuid", "already_ended", "llm_calls", "trainable_turns"}  # as documented
    again = httpx.post(f"{shared_server.url}/episode/end", headers={"authorization": f"Bearer {creds.api_key}"},
                       json={"episode_uuid": uuid, "task": {"task_id": "duel-1", "secret": 17, "metadata": {"k": 1}},
                             "output": {"reward": 0.25}})
    assert again.status_code == 200 and again.json() == {"episode_uuid": uuid, "already_ended": True,
                                                         "status": "completed"}, again.text
    task, reward = stored_task(shared_server, uuid)
    assert task["metadata"] == {"k": 1, "secret": 17} and reward == 0.25


def test_an_episode_key_sent_to_an_admin_endpoint_is_named(shared_server):
    with SwarmClient(shared_server.url) as swarm, swarm.episode(Task(task_id="keys"), timeout=60) as ep:
        for path in ("/episode/begin", "/control/status"):
            resp = httpx.request("POST" if path == "/episode/begin" else "GET", shared_server.url + path,
                                 headers={"authorization": f"Bearer {ep.api_key}"}, json={})
            assert resp.status_code == 401, resp.text
            assert "episode's api_key" in resp.json()["error"]["message"] and path in resp.json()["error"]["message"]
        wrong = httpx.get(shared_server.url + "/control/status", headers={"authorization": "Bearer not-a-token"})
        assert wrong.status_code == 401 and wrong.json()["error"]["message"].startswith("The admin token is wrong")
        ep.openai().chat.completions.create(model=ep.model, messages=HI)
        ep.end(0.1)


def test_an_engine_that_is_not_wired_in_is_refused_at_start(shared_server):
    resp = httpx.post(f"{shared_server.url}/control/start", headers=admin(shared_server.url),
                      json={"model": {"path": "tiny", "engine": "verl"}})
    assert resp.status_code == 400, resp.text
    err = resp.json()["error"]
    assert err["code"] == "invalid_job" and err["param"] == "model.engine" and "not wired" in err["message"]
    if importlib.util.find_spec("vllm") is None:  # this venv has no vLLM: engine vllm is refused naming the extra
        resp = httpx.post(f"{shared_server.url}/control/start", headers=admin(shared_server.url),
                          json={"model": {"path": "tiny", "engine": "vllm"}})
        assert resp.status_code == 400 and "vibe-rl[vllm]" in resp.json()["error"]["message"], resp.text
    with SwarmClient(shared_server.url) as swarm:
        assert swarm.status().state == "ROLLING"  # the running job is untouched


def test_an_episode_block_used_without_with_says_so_and_begins_nothing(shared_server):
    with SwarmClient(shared_server.url) as swarm:
        running = swarm.status().running_count
        ep = swarm.episode(Task(task_id="nowith"))
        with pytest.raises(NotAnEpisodeError, match=r"with swarm\.episode\(task\) as ep"):
            ep.openai()
        assert not hasattr(ep, "model")
        eps = open_episodes({"a": swarm, "b": swarm}, Task(task_id="nowith"))
        with pytest.raises(NotAnEpisodeError, match=r"open_episodes"):
            eps["a"]
        assert swarm.status().running_count == running


def test_a_numpy_reward_is_taken_as_a_float(shared_server):
    with SwarmClient(shared_server.url) as swarm, swarm.episode(Task(task_id="np"), timeout=60) as ep:
        ep.openai().chat.completions.create(model=ep.model, messages=HI)
        assert ep.end(np.float32(0.5)).llm_calls == 1
    assert stored_task(shared_server, ep.uuid)[1] == 0.5


def test_metadata_without_a_json_form_is_a_config_error_naming_it(shared_server):
    with SwarmClient(shared_server.url) as swarm:
        before = swarm.status().pool.aborted_episodes
        with pytest.raises(ConfigError, match=r"metadata\['scores'\] is a numpy\.ndarray.*\.tolist\(\)"), \
                swarm.episode(Task(task_id="md"), timeout=60) as ep:
            ep.openai().chat.completions.create(model=ep.model, messages=HI)
            ep.end(0.1, {"scores": np.array([1, 2])})
        assert swarm.status().pool.aborted_episodes == before + 1  # the block aborted it; nothing half-sent
        running = swarm.status().running_count
        with pytest.raises(ConfigError, match=r"the task must be JSON"):
            swarm.begin(Task(task_id="md", board=np.zeros(3)))
        assert swarm.status().running_count == running  # refused before the episode began


def test_one_bad_reward_in_eps_end_ends_no_episode(shared_server):
    with SwarmClient(shared_server.url) as swarm:
        before = swarm.status().pool
        tasks = {seat: Task(task_id=f"duel-{seat}") for seat in ("p0", "p1")}
        with pytest.raises(pydantic.ValidationError), open_episodes({"p0": swarm, "p1": swarm}, tasks,
                                                                    timeout=60) as eps:
            for seat in eps:
                eps[seat].openai().chat.completions.create(model=eps[seat].model, messages=HI, user=f"{seat}:0")
            eps.end({"p0": 1.0, "p1": math.nan})
        after = swarm.status().pool
        assert after.aborted_episodes == before.aborted_episodes + 2
        assert after.completed_episodes == before.completed_episodes  # p0 was not stored without p1


def test_a_boot_job_the_server_refuses_is_reported_not_a_crash(make_server, tmp_path):
    config = tmp_path / "verl.yaml"
    config.write_text("model:\n  path: tiny\n  engine: verl\n")
    server = make_server("verl", extra=["--config", str(config), "--boot"])
    with SwarmClient(server.url) as swarm:
        status = swarm.status()
    assert status.state == "OFFLINE" and any("not wired" in e for e in status.errors), status.errors
