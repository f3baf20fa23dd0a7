"""More of what careless clients written from the docs alone send, on a real server over loopback (the official
openai SDK and plain httpx): OpenAI's `null` for "not set", output keys beside the reward, HEAD and wrong methods,
compressed or non-Unicode bodies, a doubled slash, and episodes begun and never ended. Each is served like OpenAI
serves it, or refused with an error envelope that says what was wrong and how to fix it; nothing is dropped."""

from __future__ import annotations

import gzip
import json
import sqlite3
import sys

import httpx
import openai
import pytest

from tests.swarm.conftest import FAST, ROOT, admin
from vibe_rl.swarm import SwarmClient, Task, TrainJob
from vibe_rl.swarm.launch import free_port, spawn, stop, wait_healthy

HI = [{"role": "user", "content": "hi"}]


def stored(server, uuid: str) -> tuple[dict, dict]:
    with sqlite3.connect(server.exp_dir / "swarm.sqlite") as db:
        task_json, metadata_json = db.execute("SELECT task_json, metadata_json FROM episodes WHERE episode_uuid = ?",
                                              (uuid,)).fetchone()
    return json.loads(task_json), json.loads(metadata_json)


def test_null_optional_fields_take_their_defaults_as_openai_does(shared_server):
    """The SDK sends `null` for a keyword passed as None (clients forward their own None defaults)."""
    with SwarmClient(shared_server.url) as swarm, swarm.episode(Task(task_id="nulls"), timeout=60) as ep:
        llm = ep.openai()
        reply = llm.chat.completions.create(model=ep.model, messages=HI, n=None, stream=None, logprobs=None,
                                            temperature=None, max_tokens=None, stop=None, seed=None, user=None,
                                            tool_choice=None, presence_penalty=None)
        assert len(reply.choices) == 1 and reply.choices[0].logprobs is None and reply.usage.max_tokens_cap == 12
        assert getattr(reply, "vibe_ignored_fields", None) is None  # the nulls are not "unknown fields"
        text = llm.completions.create(model=ep.model, prompt="hi", n=None, echo=None, stream=None, logprobs=None,
                                      max_tokens=None)
        assert len(text.choices) == 1 and text.choices[0].logprobs is None
        with pytest.raises(openai.BadRequestError) as info:  # a required field stays required
            llm.chat.completions.create(model=ep.model, messages=None)
        assert info.value.body["param"] == "messages", info.value.body
        assert ep.end(0.5).llm_calls == 2


def test_an_empty_list_of_content_parts_is_refused_like_openai_does(shared_server):
    with SwarmClient(shared_server.url) as swarm, swarm.episode(Task(task_id="parts"), timeout=60) as ep:
        chat = ep.openai().chat.completions
        with pytest.raises(openai.BadRequestError) as info:
            chat.create(model=ep.model, messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": []}])
        assert info.value.body["param"] == "messages[1].content" and "at least one text part" in info.value.body[
            "message"], info.value.body
        reply = chat.create(model=ep.model, messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
        assert reply.choices[0].message.content is not None
        assert ep.end(0.5).llm_calls == 1  # only the served call is recorded


def test_output_keys_beside_the_reward_are_kept_in_metadata(shared_server):
    url = shared_server.url
    with SwarmClient(url) as swarm:
        uuid, creds = swarm.begin_episode(60)
        openai.OpenAI(base_url=creds.base_url, api_key=creds.api_key).chat.completions.create(model=creds.model,
                                                                                              messages=HI)
        key = {"authorization": f"Bearer {creds.api_key}"}
        clash = httpx.post(f"{url}/episode/end", headers=key, json={
            "episode_uuid": uuid, "task": {"task_id": "extras"}, "output": {"reward": 1, "k": 1, "metadata": {"k": 2}}})
        assert clash.status_code == 400 and "'k' is given both" in clash.json()["error"]["message"], clash.text
        for bad in (True, [1, 2], {"id": 1}):  # str() would make group keys of 'True', '[1, 2]', ...
            resp = httpx.post(f"{url}/episode/end", headers=key, json={
                "episode_uuid": uuid, "task": {"task_id": bad}, "output": {"reward": 1}})
            assert resp.status_code == 400 and "task_id must be a string" in resp.json()["error"]["message"], resp.text
        resp = httpx.post(f"{url}/episode/end", headers=key, json={
            "episode_uuid": uuid, "task": {"task_id": "extras"},
            "output": {"reward": 1, "winner": "p1", "rounds": 7, "metadata": {"seed": 3}}})
        assert resp.status_code == 200 and resp.json()["llm_calls"] == 1, resp.text
        assert stored(shared_server, uuid)[1] == {"seed": 3, "winner": "p1", "rounds": 7}
        # SwarmClient.end_episode with a dict (as docs/client.md shows) keeps them too
        uuid2, creds2 = swarm.begin_episode(60)
        openai.OpenAI(base_url=creds2.base_url, api_key=creds2.api_key).chat.completions.create(model=creds2.model,
                                                                                                messages=HI)
        swarm.end_episode({"task_id": "extras"}, uuid2, {"reward": 0.5, "winner": "p2"})
        assert stored(shared_server, uuid2)[1] == {"winner": "p2"}


def test_head_and_wrong_methods_name_the_method_to_use(shared_server):
    url = shared_server.url
    head = httpx.head(f"{url}/healthz")
    assert head.status_code == 200 and head.content == b"" and int(head.headers["content-length"]) > 0
    assert httpx.head(f"{url}/control/status", headers=admin(url)).status_code == 200
    assert httpx.head(f"{url}/control/status").status_code == 401  # still behind the token
    for method, path, allow in (("GET", "/control/start", "POST"), ("DELETE", "/control/stop", "POST"),
                                ("POST", "/control/status", "GET"), ("GET", "/v1/chat/completions", "POST")):
        resp = httpx.request(method, url + path, headers=admin(url), json={} if method == "POST" else None)
        assert resp.status_code == 405 and resp.headers["allow"] == allow, (path, resp.status_code, resp.headers)
        err = resp.json()["error"]
        assert err["code"] == "method_not_allowed" and f"takes {allow}, not {method}" in err["message"], err


def test_bodies_that_are_not_plain_utf8_json_say_why(shared_server):
    url = shared_server.url
    with SwarmClient(url) as swarm, swarm.episode(Task(task_id="bytes"), timeout=60) as ep:
        key = {"authorization": f"Bearer {ep.api_key}", "content-type": "application/json"}
        body = json.dumps({"model": ep.model, "messages": HI}).encode()
        resp = httpx.post(f"{url}/v1/chat/completions", headers={**key, "content-encoding": "gzip"},
                          content=gzip.compress(body))
        assert resp.status_code == 415 and "send the JSON body uncompressed" in resp.json()["error"]["message"]
        # json.dumps (requests' default ensure_ascii) writes a lone surrogate as a \ud800 escape
        resp = httpx.post(f"{url}/v1/chat/completions", headers=key,
                          content=json.dumps({"model": ep.model, "messages": [{"role": "user", "content": "a\ud800"}]}))
        err = resp.json()["error"]
        assert resp.status_code == 400 and err["code"] == "invalid_json" and "lone UTF-16 surrogate" in err["message"]
        resp = httpx.post(f"{url}/v1//chat/completions/", headers=key, content=body)
        assert resp.status_code == 404 and "Did you mean /v1/chat/completions?" in resp.json()["error"]["message"]
        ep.abort()


def test_episodes_begun_and_never_ended_are_bounded(tmp_path, tiny_model_dir):
    """A client that leaks episodes gets a clear 503 at the server's limit instead of growing its memory."""
    port = free_port()
    exp = tmp_path / "cap"
    code = ("from vibe_rl.swarm.server.app import serve; from vibe_rl.swarm.server.config import ServerConfig; "
            f"serve(ServerConfig(port={port}, model='tiny', experiment_dir={str(exp)!r}, overrides={FAST!r}, "
            "max_running_episodes=3))")
    log = tmp_path / "cap.log"
    proc = spawn([sys.executable, "-c", code], log, cwd=ROOT)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, proc, timeout=120.0, log_path=log)
        with SwarmClient(url) as swarm:
            swarm.auto_sync_train_config_and_start_engine(TrainJob(), verbose=False)
            eps = [swarm.begin(Task(task_id="leak"), timeout=600) for _ in range(3)]
            resp = httpx.post(f"{url}/episode/begin", headers=admin(url), json={})
            err = resp.json()["error"]
            assert resp.status_code == 503 and err["code"] == "too_many_running_episodes", resp.text
            assert "ep.end / ep.abort" in err["message"] and "max_running_episodes" in err["message"]
            eps[0].abort()  # room again
            more = swarm.begin(Task(task_id="leak"), timeout=600)
            assert swarm.status().running_count == 3
            for ep in (*eps[1:], more):
                ep.abort()
    finally:
        stop(proc)
