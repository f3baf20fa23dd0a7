"""A local stand-in for the OpenAI and Anthropic HTTP APIs with scripted answers (no network)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ScriptedAPI:
    """POST /v1/chat/completions (OpenAI) and POST /v1/messages (Anthropic) answer with the next scripted
    payload: a string for OpenAI content, a dict for an Anthropic tool_use input. The last one repeats."""

    def __init__(self, replies: list[Any]):
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                outer.requests.append(body)
                outer.paths.append(self.path)
                reply = outer.replies[min(len(outer.requests), len(outer.replies)) - 1]
                data = outer._anthropic(body, reply) if self.path.endswith("/messages") else outer._openai(body, reply)
                raw = json.dumps(data).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args):
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.root = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def _openai(self, body: dict, reply: Any) -> dict:
        content = reply if isinstance(reply, str) else json.dumps(reply)
        return {"id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model", "scripted"),
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}

    def _anthropic(self, body: dict, reply: Any) -> dict:
        if isinstance(reply, str):
            content = [{"type": "text", "text": reply}]
        else:
            tool = body["tools"][0]["name"]
            content = [{"type": "tool_use", "id": f"toolu_{len(self.requests)}", "name": tool, "input": reply}]
        return {"id": f"msg_{len(self.requests)}", "type": "message", "role": "assistant", "content": content,
                "model": body.get("model", "scripted"), "stop_reason": "tool_use", "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1}}

    def __enter__(self) -> ScriptedAPI:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
