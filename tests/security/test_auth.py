"""Issue items 1, 2 and the Host/Origin/content-type part of 7: who may drive the server.

Each test plays the attacker (or the careless client) against a real server on loopback."""

from __future__ import annotations

import os
import stat
import subprocess

import httpx
import openai
import pytest
import yaml
from helpers.ports import free_port
from helpers.scripted_api import ScriptedAPI

from vibe_rl.schema import StaticModel
from vibe_rl.swarm import SwarmClient, SwarmHTTPError, Task, TrainJob, WorkflowOutput
from vibe_rl.swarm.auth import registry_path

from .conftest import ROOT_CLI, admin, error


def _flat(text: str) -> str:
    """CLI output without the error box's borders and line wrapping."""
    return " ".join(text.replace("│", " ").split())


CONTROL = [("POST", "/control/start"), ("POST", "/control/stop"), ("GET", "/control/status"),
           ("GET", "/control/traces"), ("POST", "/episode/begin")]


@pytest.mark.parametrize(("method", "path"), CONTROL)
def test_item1_control_plane_refuses_callers_without_the_admin_token(server, method, path):
    body = {"json": {}} if method == "POST" else {}
    err = error(httpx.request(method, server.url + path, **body), 401)
    assert err["code"] == "missing_admin_token" and "Authorization: Bearer" in err["message"]
    err = error(httpx.request(method, server.url + path, headers={"authorization": "Bearer guessed-token-1234567"},
                              **body), 401)
    assert err["code"] == "invalid_admin_token"
    # nothing happened: the engine still runs, and the admin sees it
    status = httpx.get(server.url + "/control/status", headers=admin(server.url)).json()
    assert status["state"] == "ROLLING"
    assert httpx.get(server.url + "/healthz").json()["ok"] is True  # liveness stays open


def test_item1_token_files_are_private_and_the_client_finds_the_token(server):
    token_file = server.exp_dir / "swarm.token"
    for path in (token_file, registry_path(server.port)):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert token_file.read_text().strip() == registry_path(server.port).read_text().strip()
    with SwarmClient(server.url) as client:  # no token passed: found on its own
        assert client.get_engine_status()["state"] == "ROLLING"
    token = token_file.read_text().strip()
    assert token not in server.output()  # never logged


def test_item1_a_blank_token_setting_counts_as_unset(server, monkeypatch):
    """An exported-but-empty VIBE_RL_SWARM_TOKEN (or a blank --token) does not shadow the server's token file."""
    from vibe_rl.swarm.auth import ENV_TOKEN, client_token

    token = (server.exp_dir / "swarm.token").read_text().strip()
    monkeypatch.setenv(ENV_TOKEN, "  ")
    assert client_token(server.url) == token
    assert client_token(server.url, explicit=" ") == token
    with SwarmClient(server.url) as client:
        assert client.get_engine_status()["state"] == "ROLLING"


def test_item1_a_synced_job_cannot_add_static_models_or_divert_calls(make_server):
    with ScriptedAPI(["attacker's answer"]) as listener:
        server = make_server("static", env={"VICTIM_SECRET": "sk-victim-secret"})
        client = SwarmClient(server.url)
        evil = TrainJob(static_models=[StaticModel(name="evil", base_url=listener.url, api_key_env="VICTIM_SECRET")])
        with pytest.raises(SwarmHTTPError) as info:
            client.auto_sync_train_config_and_start_engine(evil, verbose=False)
        assert info.value.status == 403 and info.value.code == "static_model_not_allowed"
        shadow = TrainJob(static_models=[StaticModel(name="tiny", base_url=listener.url)])  # the trainable's name
        with pytest.raises(SwarmHTTPError, match="not started with"):
            client.auto_sync_train_config_and_start_engine(shadow, verbose=False)
        client.auto_sync_train_config_and_start_engine(TrainJob(), verbose=False)
        episode_uuid, api = client.begin_episode()
        llm = openai.OpenAI(base_url=api.base_url, api_key=api.api_key, max_retries=0)
        with pytest.raises(openai.NotFoundError):
            llm.chat.completions.create(model="evil", messages=[{"role": "user", "content": "hi"}])
        client.abort_episode(episode_uuid)
        client.close()
    assert listener.requests == [] and listener.auth == []  # the secret never left the server


def test_item1_server_config_static_model_may_not_take_the_trainable_name(tmp_path, tiny_model_dir):
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(TrainJob(static_models=[StaticModel(name="tiny")]).model_dump(mode="json")))
    out = subprocess.run([*ROOT_CLI, "swarm", "start", "--port", str(free_port()), "--model", "tiny",
                          "--config", str(job)], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "trainable model's name" in _flat(out.stdout + out.stderr)


def test_item1_a_public_bind_needs_a_token_the_operator_chose(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIBE_RL_SWARM_TOKEN")}
    out = subprocess.run([*ROOT_CLI, "swarm", "start", "--host", "0.0.0.0", "--port", str(free_port())],
                         capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert out.returncode != 0 and "--token-file" in _flat(out.stdout + out.stderr)


def test_item2_end_and_abort_need_the_episodes_own_key(server):
    with SwarmClient(server.url) as client:
        mine, my_api = client.begin_episode()
        theirs, their_api = client.begin_episode()
    body = {"episode_uuid": mine, "task": {"task_id": "t"}, "output": {"reward": 1.0}}
    err = error(httpx.post(server.url + "/episode/end", json=body), 401)
    assert err["code"] == "missing_api_key"
    err = error(httpx.post(server.url + "/episode/end", json=body,
                           headers={"authorization": f"Bearer {their_api.api_key}"}), 401)
    assert err["code"] == "invalid_api_key"
    error(httpx.post(server.url + "/episode/abort", json={"episode_uuid": mine},
                     headers={"authorization": f"Bearer {their_api.api_key}"}), 401)
    # the owner's key works, and a retry with it is still idempotent
    for already in (False, True):
        ok = httpx.post(server.url + "/episode/end", json=body, headers={"authorization": f"Bearer {my_api.api_key}"})
        assert ok.status_code == 200 and ok.json()["already_ended"] is already
    ok = httpx.post(server.url + "/episode/abort", json={"episode_uuid": theirs},
                    headers={"authorization": f"Bearer {their_api.api_key}"})
    assert ok.status_code == 200 and ok.json()["aborted"] is True
    # episode ids are only listed to the admin
    error(httpx.get(server.url + "/control/traces"), 401)
    with SwarmClient(server.url) as client:
        episode_uuid, _ = client.begin_episode()
        assert client.end_episode(Task(task_id="t"), episode_uuid, WorkflowOutput(reward=0.5))["already_ended"] is False


def test_item7_foreign_host_origin_and_non_json_posts_are_refused(server):
    url, headers = server.url, admin(server.url)
    err = error(httpx.get(url + "/control/status", headers={**headers, "host": "evil.example:80"}), 403)
    assert err["code"] == "host_not_allowed"
    err = error(httpx.post(url + "/episode/begin", json={}, headers={**headers, "origin": "http://evil.example"}), 403)
    assert err["code"] == "origin_not_allowed"
    err = error(httpx.post(url + "/episode/begin", content=b"{}", headers={**headers, "content-type": "text/plain"}),
                415)
    assert err["code"] == "unsupported_media_type"
    error(httpx.post(url + "/control/stop", content=b"x", headers={**headers, "content-type": "text/plain"}), 415)
    # the server's own names still work, and begin's base_url names the server, not a foreign host
    begun = httpx.post(url + "/episode/begin", json={}, headers={**headers, "host": f"localhost:{server.port}"}).json()
    assert begun["base_url"].startswith(f"http://localhost:{server.port}/")
    with SwarmClient(url) as client:
        client.abort_episode(begun["episode_uuid"])
        assert client.get_engine_status()["state"] == "ROLLING"


def test_item7_sqlite_store_is_private(server):
    for name in ("swarm.sqlite", "swarm.sqlite-wal"):
        path = server.exp_dir / name
        if path.exists():
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, name

