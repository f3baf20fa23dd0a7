"""A local OpenAI-compatible chat server with scripted answers: the stand-in for an external LLM API."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ScriptedLLM:
    """Answers each POST /v1/chat/completions with the next scripted reply (the last one repeats)."""

    def __init__(self, replies: list[str]):
        self.replies = list(replies)
        self.requests: list[dict] = []
        self.auth: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                outer.requests.append(body)
                outer.auth.append(self.headers.get("x-api-key") or self.headers.get("Authorization", ""))
                reply = outer.replies[min(len(outer.requests), len(outer.replies)) - 1]
                if self.path.endswith("/messages"):  # the Anthropic Messages API
                    return self._send({"id": f"msg_{len(outer.requests)}", "type": "message", "role": "assistant",
                                       "model": body.get("model", "scripted"), "stop_reason": "end_turn",
                                       "stop_sequence": None, "content": [{"type": "text", "text": reply}],
                                       "usage": {"input_tokens": 1, "output_tokens": 1}})
                self._send({
                    "id": f"chatcmpl-{len(outer.requests)}", "object": "chat.completion", "created": int(time.time()),
                    "model": body.get("model", "scripted"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": reply}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                })

            def _send(self, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> ScriptedLLM:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def env(self) -> dict[str, str]:
        return {"OPENAI_BASE_URL": self.url, "OPENAI_API_KEY": "sk-test-secret-do-not-print",
                "VIBE_RL_FIX_MODEL": "scripted-fixer"}
