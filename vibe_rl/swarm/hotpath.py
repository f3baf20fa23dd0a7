"""The hot endpoints (begin, chat, end, abort) as a pure ASGI front of the FastAPI app.

Every episode makes these calls, so they skip the framework's middleware stack and
dependency solving (on a 2-core machine that stack costs about as much CPU as the
work itself). They parse with the same pydantic models, answer errors in the same
OpenAI envelope, and everything else (control, /v1/models, 404s, lifespan) goes on
to the FastAPI app unchanged.

Chat responses carry `x-vibe-engine-ms` (time inside the engine) and
`x-vibe-server-ms` (from the request's arrival to the response headers); the
server's own overhead is the difference (benchmarks/swarm_overhead.py).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from vibe_rl.swarm.protocol import (
    AbortEpisodeRequest,
    ApiError,
    BeginEpisodeRequest,
    ChatCompletionRequest,
    EndEpisodeRequest,
)

log = logging.getLogger("vibe_rl.swarm")


def _parse(model: type[BaseModel], raw: bytes) -> Any:
    from vibe_rl.swarm.app import validation_error

    try:
        return model.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        raise validation_error(exc.errors()) from None


def _header(scope: dict, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None


def _base_url(scope: dict) -> str:
    host = _header(scope, b"host")
    if not host:
        server = scope.get("server") or ("127.0.0.1", 80)
        host = f"{server[0]}:{server[1]}"
    return f"{scope.get('scheme', 'http')}://{host}/v1"


async def begin(serving: Any, scope: dict, raw: bytes, timing: dict) -> Any:
    body = _parse(BeginEpisodeRequest, raw)
    return serving.begin(body.discard_episode_timeout, _base_url(scope)).model_dump()


async def end(serving: Any, scope: dict, raw: bytes, timing: dict) -> Any:
    return await serving.end(_parse(EndEpisodeRequest, raw))


async def abort(serving: Any, scope: dict, raw: bytes, timing: dict) -> Any:
    return serving.abort(_parse(AbortEpisodeRequest, raw).episode_uuid)


async def chat(serving: Any, scope: dict, raw: bytes, timing: dict) -> Any:
    body = _parse(ChatCompletionRequest, raw)
    auth = _header(scope, b"authorization")
    key = auth[7:].strip() if auth and auth[:7].lower() == "bearer " else auth
    return await serving.chat(body, key, _header(scope, b"x-player"), timing)


Handler = Callable[[Any, dict, bytes, dict], Awaitable[Any]]
ROUTES: dict[str, Handler] = {"/episode/begin": begin, "/episode/end": end, "/episode/abort": abort,
                              "/v1/chat/completions": chat}


class HotPath:
    """ASGI app: POSTs to ROUTES are answered here; anything else goes to `app`."""

    def __init__(self, app: Any):
        self.app = app

    @property
    def state(self) -> Any:
        return self.app.state

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        handler = ROUTES.get(scope.get("path", "")) if scope["type"] == "http" else None
        if handler is None:
            return await self.app(scope, receive, send)
        if scope["method"] != "POST":
            err = ApiError(405, f"{scope['path']} takes POST, not {scope['method']}.", code="method_not_allowed")
            payload = json.dumps(err.body()).encode()
            await send({"type": "http.response.start", "status": 405, "headers": [
                (b"content-type", b"application/json"), (b"allow", b"POST"),
                (b"content-length", str(len(payload)).encode())]})
            await send({"type": "http.response.body", "body": payload})
            return
        t0 = time.perf_counter()
        chunks, more = [], True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        timing: dict[str, float] = {}
        headers: list[tuple[bytes, bytes]] = []
        try:
            result = await handler(self.app.state.serving, scope, b"".join(chunks), timing)
            status = 200
        except ApiError as err:
            status, result = err.status, err.body()
            headers = [(k.lower().encode(), v.encode()) for k, v in err.headers().items()]
        except Exception as exc:  # reported through status, answered in the envelope
            log.exception("unhandled error on POST %s", scope["path"])
            self.app.state.serving.errors.append(f"POST {scope['path']}: {type(exc).__name__}: {exc}")
            status = 500
            result = ApiError(500, f"Internal server error: {type(exc).__name__}: {exc}", code="internal_error").body()
        if "engine_s" in timing:
            headers += [(b"x-vibe-engine-ms", f"{timing['engine_s'] * 1000:.3f}".encode()),
                        (b"x-vibe-server-ms", f"{(time.perf_counter() - t0) * 1000:.3f}".encode())]
        if isinstance(result, dict):
            payload = json.dumps(result, ensure_ascii=False).encode()
            await send({"type": "http.response.start", "status": status, "headers": [
                (b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()), *headers]})
            await send({"type": "http.response.body", "body": payload})
            return
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache"), *headers]})
        async for chunk in result:  # an SSE stream of a finished completion
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
