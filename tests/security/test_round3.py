"""Issue 25 (security round 3), server side, on a real `vibe-rl swarm start` on loopback: DNS-rebinding names
(item 4), credentials checked before the body is read (item 5)."""

from __future__ import annotations

import socket

import httpx
import pytest

from vibe_rl.swarm.auth import client_token, is_loopback

from .conftest import error

REBOUND = "127.0.0.1.attacker.example"


def test_item4_a_name_that_starts_with_127_is_not_loopback(server):
    port = server.port
    assert error(httpx.get(server.url + "/healthz", headers={"host": f"{REBOUND}:{port}"}), 403)["code"] == \
        "host_not_allowed"
    resp = httpx.get(server.url + "/healthz", headers={"origin": f"http://{REBOUND}:{port}"})
    assert error(resp, 403)["code"] == "origin_not_allowed"
    assert httpx.get(server.url + "/healthz", headers={"host": f"127.0.0.1:{port}"}).status_code == 200
    # a client given the rebinding name does not send the token registered for the loopback port
    assert client_token(server.url) and client_token(f"http://{REBOUND}:{port}") is None
    assert client_token(f"http://127.0.0.1.nip.io:{port}") is None
    assert is_loopback("127.0.0.2") and is_loopback("[::1]") and not is_loopback("127.evil") \
        and not is_loopback("localhost.attacker.example")


def _partial_post(server, path: str, headers: dict[str, str], total: int = 6 << 20) -> bytes:
    """POST `total` announced bytes but send only the first 1 KiB, then read: an answer that comes while the
    body is still incomplete was given from the headers alone (the body was never read or parsed)."""
    head = "".join(f"{k}: {v}\r\n" for k, v in {"host": f"127.0.0.1:{server.port}", "content-type":
                                                "application/json", "content-length": str(total), **headers}.items())
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\n{head}\r\n".encode() + b'{"messages": "' + b"x" * 1000)
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.split(b"\r\n\r\n", 1)[1]) < _length(answer):
            chunk = sock.recv(65536)  # old code: waits for the other 6 MiB (the socket timeout fails the test)
            if not chunk:
                break
            answer += chunk
    return answer


def _length(answer: bytes) -> int:
    for line in answer.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


@pytest.mark.parametrize("path", ["/episode/end", "/episode/abort", "/v1/chat/completions", "/v1/completions"])
@pytest.mark.parametrize("credential", [None, "sk-not-a-key-of-this-server"])
def test_item5_no_credential_no_body_read(server, path, credential):
    headers = {"authorization": f"Bearer {credential}"} if credential else {}
    answer = _partial_post(server, path, headers)
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
    assert (b"invalid_api_key" if credential else b"missing_api_key") in answer


def test_item11_upstream_errors_are_redacted(make_server, tmp_path):
    """A static model's upstream answers 401 echoing the key (as OpenAI does): the caller and the server's log
    see the status and the hint, never the key or a bearer string."""
    import openai
    import yaml
    from helpers.scripted_api import Refusal, ScriptedAPI

    from vibe_rl.schema import StaticModel
    from vibe_rl.swarm import SwarmClient, TrainJob

    secret = "sk-live-" + "a1b2c3d4" * 5
    echoed = {"error": {"message": f"Incorrect API key provided: Bearer {secret}. Also sk-proj-abc****wxyz."}}
    with ScriptedAPI([Refusal(401, echoed)]) as upstream:
        job = TrainJob(static_models=[StaticModel(name="qwen-max", base_url_env="OPP_URL", api_key_env="OPP_KEY")])
        config = tmp_path / "job.yaml"
        config.write_text(yaml.safe_dump(job.model_dump(mode="json")))
        srv = make_server("redact", extra=["--config", str(config)], env={"OPP_KEY": secret, "OPP_URL": upstream.url})
        with SwarmClient(srv.url) as client:
            client.auto_sync_train_config_and_start_engine(job, verbose=False)
            episode_uuid, api = client.begin_episode()
            llm = openai.OpenAI(base_url=api.base_url, api_key=api.api_key, max_retries=0)
            with pytest.raises(openai.AuthenticationError) as info:
                llm.chat.completions.create(model="qwen-max", messages=[{"role": "user", "content": "hi"}])
            client.abort_episode(episode_uuid)
    text = str(info.value)
    assert "upstream answered 401" in text and "api_key_env" in text
    assert secret not in text and "Bearer sk" not in text and "sk-proj-abc" not in text
    assert upstream.auth == [f"Bearer {secret}"]
    assert secret not in srv.output()


def _closed_by_server(sock: socket.socket) -> bool:
    """True once the server closes `sock` (EOF or reset); the socket's own timeout fails the test on old code."""
    try:
        while True:
            if not sock.recv(4096):
                return True
    except ConnectionResetError:
        return True


def test_item13_slow_headers_are_cut(make_server):
    """Connections that send no headers, half of them, or drip them a byte at a time are closed by the server
    (`--header-timeout`, 10 s by default); a request whose headers came is served as usual."""
    import threading

    srv = make_server("slow")  # the default deadline (10 s): old code kept these connections open forever
    socks = []
    for i in range(60):
        sock = socket.create_connection(("127.0.0.1", srv.port), timeout=60)
        if i % 2:
            sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\nX-Slow: ".encode())
        socks.append(sock)
    drip = socket.create_connection(("127.0.0.1", srv.port), timeout=60)
    stop = threading.Event()

    def dribble():  # one header byte after another, never the blank line that ends them
        drip.sendall(b"GET /healthz HTTP/1.1\r\nX-Drip: ")
        while not stop.wait(0.2):
            try:
                drip.sendall(b"a")
            except OSError:
                return

    thread = threading.Thread(target=dribble, daemon=True)
    thread.start()
    try:
        assert all(_closed_by_server(s) for s in socks)
        assert _closed_by_server(drip)
    finally:
        stop.set()
        for s in [*socks, drip]:
            s.close()
    assert httpx.get(srv.url + "/healthz").json()["ok"]


EVIL_TASK = ("\x1b]0;pwned title\x07\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\x1b[H[link=http://evil.example]click[/link]"
             "[bold red]fake[/]\u202egnp.exe\x9b31m")


def test_item9_overwatch_shows_task_ids_inert(server):
    """A client's task id full of terminal escapes (title, clipboard write, clear screen) and rich markup (a
    link) reaches `vibe-rl swarm overwatch --once` (real CLI, real server) as visible text, with no escape."""
    import subprocess
    import sys

    from vibe_rl.swarm import SwarmClient, Task, WorkflowOutput

    with SwarmClient(server.url) as client:
        episode_uuid, _ = client.begin_episode()
        client.end_episode(Task(task_id=EVIL_TASK), episode_uuid, WorkflowOutput(reward=0.0))
    done = subprocess.run([sys.executable, "-c", "from vibe_rl.cli import main; main()", "swarm", "overwatch",
                           "--once", "--url", server.url], capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "COLUMNS": "400", "TERM": "dumb"})
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out and "\u202e" not in out
    assert "[link=http://evil.example]click[/link]" in out and "[bold red]fake[/]" in out  # shown, not parsed
    assert "\\x1b]0;pwned title" in out  # the escape is written out, visibly


def test_item7_one_episode_cannot_hold_unbounded_data(make_server):
    """Per-episode bounds on a real server through the official SDK: request bytes (413 episode_too_large) and
    calls (413 episode_too_many_calls); the other episodes go on. Extra message keys are dropped, not stored."""
    import json
    import sqlite3

    import openai

    from vibe_rl.swarm import SwarmClient, Task, TrainJob, WorkflowOutput

    srv = make_server("bounded", extra=["--max-episode-bytes", "200000", "--max-episode-calls", "3"])
    with SwarmClient(srv.url) as client:
        client.auto_sync_train_config_and_start_engine(TrainJob(), verbose=False)
        first, api = client.begin_episode()
        llm = openai.OpenAI(base_url=api.base_url, api_key=api.api_key, max_retries=0)
        big = [{"role": "user", "content": "hi", "padding": "x" * 90_000}]  # request bytes count, stored or not
        llm.chat.completions.create(model=api.model, messages=big, max_tokens=1)
        llm.chat.completions.create(model=api.model, messages=big, max_tokens=1)
        with pytest.raises(openai.APIStatusError) as info:
            llm.chat.completions.create(model=api.model, messages=big, max_tokens=1)
        assert info.value.status_code == 413 and info.value.body["code"] == "episode_too_large"
        assert "200000" in info.value.message
        client.abort_episode(first)

        second, api = client.begin_episode()
        llm = openai.OpenAI(base_url=api.base_url, api_key=api.api_key, max_retries=0)
        padded = [{"role": "user", "content": "hi", "padding": "p" * 5000, "x_extra": {"deep": [1, 2, 3]}}]
        for _ in range(3):
            llm.chat.completions.create(model=api.model, messages=padded, max_tokens=1)
        with pytest.raises(openai.APIStatusError) as info:
            llm.chat.completions.create(model=api.model, messages=padded, max_tokens=1)
        assert info.value.status_code == 413 and info.value.body["code"] == "episode_too_many_calls"
        client.end_episode(Task(task_id="t-bounded"), second, WorkflowOutput(reward=1.0))
    db = sqlite3.connect(srv.exp_dir / "swarm.sqlite")
    rows = [json.loads(m) for (m,) in db.execute("SELECT messages_json FROM turns WHERE episode_uuid = ?", (second,))]
    db.close()
    assert len(rows) == 3 and all(m == [{"role": "user", "content": "hi"}] for m in rows), rows[:1]


def test_item6_tool_schemas_are_measured_and_bounded(server):
    """Tools are counted by their real size: a 4 MB tool description and a 1 MB tool-call name are refused
    (400, naming the limit) before anything renders them; a tool of 100 KB (under the bound) counts as a long
    prompt, so it is rendered off the event loop."""
    import openai

    from vibe_rl.swarm import SwarmClient
    from vibe_rl.swarm.protocol import ChatCompletionRequest
    from vibe_rl.swarm.server.generate import INLINE_PROMPT_CHARS, _prompt_chars

    def tool(description: str, name: str = "vote") -> dict:
        return {"type": "function", "function": {"name": name, "description": description,
                                                 "parameters": {"type": "object", "properties": {}}}}

    with SwarmClient(server.url) as client:
        episode_uuid, api = client.begin_episode()
    llm = openai.OpenAI(base_url=api.base_url, api_key=api.api_key, max_retries=0)
    hi = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.BadRequestError) as info:
        llm.chat.completions.create(model=api.model, messages=hi, tools=[tool("d" * 4_000_000)])
    assert info.value.code == "tools_too_large" and "max_tools_bytes" in info.value.message
    with pytest.raises(openai.BadRequestError) as info:
        llm.chat.completions.create(model=api.model, messages=hi, tools=[tool("d")] * 500)
    assert info.value.code == "too_many_tools"
    history = [*hi, {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "n" * 1_000_000, "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    with pytest.raises(openai.BadRequestError) as info:
        llm.chat.completions.create(model=api.model, messages=history)
    assert info.value.code == "invalid_tool_calls" and "function.name" in info.value.message
    with SwarmClient(server.url) as client:
        client.abort_episode(episode_uuid)
    req = ChatCompletionRequest(model="m", messages=hi, tools=[tool("d" * 100_000)])
    assert _prompt_chars(req) > INLINE_PROMPT_CHARS  # old estimate: 1000 a tool, rendered on the loop


def test_item5_unknown_routes_are_answered_unread(server):
    """A POST without a credential to a route no stranger may use (unknown, or the control API) is answered
    from its headers too: the 6 MiB body is never read."""
    assert _partial_post(server, "/not/a/route", {}).startswith(b"HTTP/1.1 404")
    assert _partial_post(server, "/control/start", {}).startswith(b"HTTP/1.1 401")
    assert _partial_post(server, "/v1/embeddings", {}).startswith(b"HTTP/1.1 401")


def test_item7_a_large_episode_page_does_not_stall_the_server(make_server):
    """/control/ui renders an episode in a worker thread: while a 40 MB episode's page is built, /healthz keeps
    answering (counted in answers during the request, not in seconds)."""
    import json
    import sqlite3
    import threading

    from vibe_rl.swarm import SwarmClient, Task, TrainJob, WorkflowOutput
    from vibe_rl.swarm.auth import client_token

    srv = make_server("view")
    with SwarmClient(srv.url) as client:
        client.auto_sync_train_config_and_start_engine(TrainJob(), verbose=False)
        episode_uuid, _ = client.begin_episode()
        client.end_episode(Task(task_id="big"), episode_uuid, WorkflowOutput(reward=1.0))
    big = json.dumps([{"role": "user", "content": "<b>&" * 500_000}])  # 2 MB of text to escape, per turn
    db = sqlite3.connect(srv.exp_dir / "swarm.sqlite", timeout=60)
    with db:
        db.executemany("INSERT INTO turns (episode_uuid, idx, player, model, static, weight_version, messages_json, "
                       "response_text) VALUES (?, ?, 'p', 'tiny', 0, 0, ?, 'x')",
                       [(episode_uuid, 1000 + i, big) for i in range(20)])
    db.close()
    done: dict = {}

    headers_came = threading.Event()  # the page is built: the server sends its headers once the body is ready

    def open_page():
        with httpx.stream("GET", f"{srv.url}/control/ui/episode/{episode_uuid}", timeout=300,
                          headers={"authorization": f"Bearer {client_token(srv.url)}"}) as resp:
            headers_came.set()
            done["status"], done["size"] = resp.status_code, len(resp.read())

    thread = threading.Thread(target=open_page)
    thread.start()
    answered_during = 0  # /healthz answers that came back while the page was being built
    while not headers_came.is_set() and thread.is_alive():
        assert httpx.get(srv.url + "/healthz", timeout=300).json()["ok"]
        answered_during += not headers_came.is_set()
    thread.join()
    assert done["status"] == 200 and done["size"] > 40_000_000
    assert answered_during >= 5, answered_during  # a page built on the event loop holds every /healthz
