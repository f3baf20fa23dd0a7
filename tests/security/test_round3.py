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
