"""A local stand-in for external LLM HTTP APIs with scripted answers (no network): POST /v1/chat/completions
(OpenAI) and POST /v1/messages (Anthropic). It records every request body, path and credential header."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class ToolCall:
    """An OpenAI assistant message that calls the function `name` with `arguments` (no text content)."""

    name: str
    arguments: dict[str, Any]


@dataclass
class Refusal:
    """An HTTP error answer: `status` with the JSON `payload` (e.g. a 400 context_length_exceeded)."""

    status: int
    payload: dict[str, Any]


Answer = str | dict | ToolCall | Refusal


class ScriptedAPI:
    """Answers each POST with the next scripted reply (the last one repeats), or with `answer(body)` when a
    callable is given. A str is the OpenAI message content or an Anthropic text block; a dict is an Anthropic
    tool_use input (JSON text for OpenAI); a ToolCall is an OpenAI tool call; a Refusal is an HTTP error.

    Records `requests` (bodies), `paths` and `auth` (the x-api-key header, else Authorization)."""

    def __init__(self, replies: list[Answer] | Callable[[dict], Answer]):
        self.answer = replies if callable(replies) else None
        self.replies = [] if callable(replies) else list(replies)
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.auth: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with outer._lock:
                    outer.requests.append(body)
                    outer.paths.append(self.path)
                    outer.auth.append(self.headers.get("x-api-key") or self.headers.get("Authorization", ""))
                    n = len(outer.requests)
                reply = outer.answer(body) if outer.answer else outer.replies[min(n, len(outer.replies)) - 1]
                if isinstance(reply, Refusal):
                    return self._send(reply.status, reply.payload)
                if self.path.endswith("/messages"):
                    return self._send(200, outer._anthropic(body, reply, n))
                self._send(200, outer._openai(body, reply, n))

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.root = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self.url = f"{self.root}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @staticmethod
    def _openai(body: dict, reply: Answer, n: int) -> dict:
        if isinstance(reply, ToolCall):
            message = {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"call_{n}", "type": "function",
                 "function": {"name": reply.name, "arguments": json.dumps(reply.arguments)}}]}
        else:
            message = {"role": "assistant", "content": reply if isinstance(reply, str) else json.dumps(reply)}
        return {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model", "scripted"),
                "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None, "message": message}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}

    @staticmethod
    def _anthropic(body: dict, reply: Answer, n: int) -> dict:
        if isinstance(reply, str):
            content, stop = [{"type": "text", "text": reply}], "end_turn"
        else:
            tool = body["tools"][0]["name"]
            content, stop = [{"type": "tool_use", "id": f"toolu_{n}", "name": tool, "input": reply}], "tool_use"
        return {"id": f"msg_{n}", "type": "message", "role": "assistant", "content": content,
                "model": body.get("model", "scripted"), "stop_reason": stop, "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1}}

    def env(self, **extra: str) -> dict[str, str]:
        """OPENAI_BASE_URL/OPENAI_API_KEY pointing at this server (a fake secret tests can look for), plus extra."""
        return {"OPENAI_BASE_URL": self.url, "OPENAI_API_KEY": "sk-test-secret-do-not-print", **extra}

    def __enter__(self) -> ScriptedAPI:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
