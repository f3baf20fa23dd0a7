"""The hot endpoints (begin, chat, end, abort; the two-phase end's prepare, commit, outcome: `txn.py`) as a
pure ASGI front of the FastAPI app.

Every episode makes these calls, so they skip the framework's middleware stack and
dependency solving (on a 2-core machine that stack costs about as much CPU as the
work itself). They parse with the same pydantic models, answer errors in the same
OpenAI envelope, and everything else (control, /v1/models, 404s, lifespan) goes on
to the FastAPI app unchanged.

Before any route, `vibe_rl.swarm.server.guard.Guard` checks Host/Origin, the JSON content
type, the body size (413) and the admin token of control routes; bodies of every
POST are read here, capped, and replayed to the FastAPI app.

Chat responses carry `x-vibe-engine-ms` (time inside the engine) and
`x-vibe-server-ms` (from the request's arrival to the response headers); the
server's own overhead is the difference (benchmarks/swarm_overhead.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from vibe_rl.swarm.auth import bearer
from vibe_rl.swarm.protocol import (
    AbortEpisodeRequest,
    BeginEpisodeRequest,
    ChatCompletionRequest,
    EndEpisodeRequest,
    PrepareEpisodeRequest,
    TxnEpisodeRequest,
)
from vibe_rl.swarm.server.errors import ApiError, validation_error
from vibe_rl.swarm.server.guard import Guard, header

log = logging.getLogger("vibe_rl.swarm")


def _parse(model: type[BaseModel], raw: bytes) -> Any:
    try:
        return model.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        raise validation_error(exc.errors()) from None
    except OverflowError as exc:  # e.g. a reward of 10**400: an int too large for a float
        raise ApiError(400, f"A number in the body is out of range ({exc}). Send numbers that fit a 64-bit float "
                            "(rewards: |reward| <= ServerConfig.max_abs_reward, 1e6 by default).",
                       code="number_out_of_range") from None
    except (RecursionError, ValueError) as exc:  # nesting beyond the parser's limit
        raise ApiError(400, f"Malformed JSON body: {type(exc).__name__}.", code="invalid_json") from None


_header = header


def _credential(scope: dict) -> str | None:
    return bearer(_header(scope, b"authorization"))


def _base_url(scope: dict) -> str:
    host = _header(scope, b"host")  # the guard has checked it names this server
    if not host:
        server = scope.get("server") or ("127.0.0.1", 80)
        host = f"{server[0]}:{server[1]}"
    return f"{scope.get('scheme', 'http')}://{host}/v1"


async def begin(serving: Any, scope: dict, raw: bytes, timing: dict) -> Any:
    body = _parse(BeginEpisodeRequest, raw)
    return serving.begin(body.discard_episode_timeout, _base_url(scope), kind=body.kind,
                         group=body.group).model_dump()


async def end(serving: Any, scope: dict, raw: bytes, timing: dict) -> Any:
    return await serving.end(_parse(EndEpisodeRequest, raw), _credential(scope), scope.get("vibe_admin", False))


async def abort(serving: Any, scope: dict, raw: bytes, timing: dict) -> Any:
    return await serving.abort(_parse(AbortEpisodeRequest, raw).episode_uuid, _credential(scope),
                         scope.get("vibe_admin", False))


async def prepare(serving: Any, scope: dict, raw: bytes, timing: dict) -> Any:
    return await serving.txns.prepare(_parse(PrepareEpisodeRequest, raw), _credential(scope),
                                      scope.get("vibe_admin", False))


async def commit(serving: Any, scope: dict, raw: bytes, timing: dict) -> Any:
    return await serving.txns.commit(_parse(TxnEpisodeRequest, raw), _credential(scope), scope.get("vibe_admin", False))


async def outcome(serving: Any, scope: dict, raw: bytes, timing: dict) -> Any:
    return await serving.txns.outcome(_parse(TxnEpisodeRequest, raw), _credential(scope),
                                      scope.get("vibe_admin", False))


def _episode_key(serving: Any, scope: dict) -> str | None:
    """The episode key of a model call; the admin token is refused with its own explanation."""
    key = _credential(scope)
    if scope.get("vibe_admin") and key not in serving.registry.by_key:
        raise ApiError(401, "The admin token does not call models: each model call goes through an episode. Begin "
                            "one (swarm.episode(task) / POST /episode/begin) and send its api_key "
                            "(Authorization: Bearer <api_key>).", code="invalid_api_key")
    return key


async def chat(serving: Any, scope: dict, raw: bytes, timing: dict) -> Any:
    body = _parse(ChatCompletionRequest, raw)
    timing["request_bytes"] = len(raw)  # counted against the episode's max_episode_bytes
    return await serving.chat(body, _episode_key(serving, scope), _header(scope, b"x-player"), timing)


async def completions(serving: Any, scope: dict, raw: bytes, timing: dict) -> Any:
    from vibe_rl.swarm.protocol import CompletionRequest
    from vibe_rl.swarm.server.completions import complete

    return await complete(serving, _parse(CompletionRequest, raw), _episode_key(serving, scope),
                          _header(scope, b"x-player"), timing)


Handler = Callable[[Any, dict, bytes, dict], Awaitable[Any]]
ROUTES: dict[str, Handler] = {"/episode/begin": begin, "/episode/end": end, "/episode/abort": abort,
                              "/episode/prepare": prepare, "/episode/commit": commit, "/episode/outcome": outcome,
                              "/v1/chat/completions": chat, "/v1/completions": completions}


async def _send_error(send: Any, err: ApiError, extra: list[tuple[bytes, bytes]] = ()) -> None:
    payload = json.dumps(err.body()).encode()
    headers = [(k.lower().encode(), v.encode()) for k, v in err.headers().items()]
    await send({"type": "http.response.start", "status": err.status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
        *headers, *extra]})
    await send({"type": "http.response.body", "body": payload})


async def _read_body(receive: Any, limit: int) -> bytes | None:
    """The whole body, None if the client went away; raises 413 past `limit` bytes."""
    chunks, size, more = [], 0, True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise ApiError(413, "", code="body_too_large")
        chunks.append(chunk)
        more = message.get("more_body", False)
    return b"".join(chunks)


class HotPath:
    """ASGI app: every request is checked by `guard`; POSTs to ROUTES are answered here, anything
    else goes to `app` (POST bodies read here, capped, and replayed)."""

    def __init__(self, app: Any, guard: Guard):
        self.app, self.guard = app, guard

    @property
    def state(self) -> Any:
        return self.app.state

    def _episode_key_as_admin(self, scope: dict) -> ApiError | None:
        """A 401 that says so when the credential sent to an admin endpoint is an episode's api_key (a
        common slip: reusing the last episode's key to begin the next one)."""
        serving = getattr(self.app.state, "serving", None)
        keys = [header(scope, b"x-vibe-rl-token"), _credential(scope)]
        if serving is None or not any(k and serving.registry.knows_key(k) for k in keys):
            return None
        return ApiError(401, f"{scope.get('path', '')} needs the server's admin token, and this is an episode's "
                             "api_key: an episode key only calls /v1 and ends or aborts its own episode. Send the "
                             "admin token (`Authorization: Bearer <token>`; SwarmClient finds it itself on the same "
                             "machine, else VIBE_RL_SWARM_TOKEN / VIBE_RL_SWARM_TOKEN_FILE; the server keeps it in "
                             "<experiment dir>/swarm.token).", code="invalid_admin_token")

    def _unknown_credential(self, scope: dict) -> ApiError | None:
        """end, abort and model calls take the admin token or a key this server issued: any other request is
        answered from its headers alone, so a client without a credential cannot make the server read and decode
        megabytes of JSON on its event loop."""
        serving = getattr(self.app.state, "serving", None)
        key = _credential(scope)
        if serving is not None and key and serving.registry.knows_key(key):
            return None  # a running episode's key, or a gone one's (its route explains: 410)
        if serving is None:
            return ApiError(401, "Send an episode's own API key or the admin token.",
                            code="invalid_api_key" if key else "missing_api_key")
        try:
            serving.registry.for_key(key)
        except ApiError as err:  # the same 'Missing API key' / 'Unknown API key' answers as a model call's
            if scope.get("path", "").startswith("/episode/"):
                err.message += " The admin token may also end or abort any episode."
            return err
        return None

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        refused = self.guard.check(scope)
        if refused is not None:
            if refused.code == "invalid_admin_token":
                refused = self._episode_key_as_admin(scope) or refused
            return await _send_error(send, refused)
        path = scope.get("path", "")
        handler = ROUTES.get(path)
        if handler is None and path.startswith("/v1/") and not scope["vibe_admin"]:
            serving = getattr(self.app.state, "serving", None)
            key = _credential(scope)
            if serving is None or not key or not serving.registry.knows_key(key):
                return await _send_error(send, ApiError(401, "Send an episode's own API key (ep.api_key of "
                                                             "swarm.episode(task), or begin_episode's; keys of a "
                                                             "restarted server no longer work) or the admin token.",
                                                             code="invalid_api_key"))
        if handler is None and scope["method"] == "HEAD":  # a GET route's headers, as HTTP has HEAD answer
            return await self.app({**scope, "method": "GET"}, receive, _headers_only(send))
        if handler is None and scope["method"] != "POST":
            return await self.app(scope, receive, send)
        if handler is not None and scope["method"] != "POST":
            err = ApiError(405, f"{scope['path']} takes POST, not {scope['method']}.", code="method_not_allowed")
            return await _send_error(send, err, [(b"allow", b"POST")])
        if handler is not None and path != "/episode/begin" and not scope["vibe_admin"]:
            refused = self._unknown_credential(scope)  # before a byte of the body is read or parsed
            if refused is not None:
                return await _send_error(send, refused)
        if handler is None and not scope["vibe_admin"] and not path.startswith("/v1/"):
            return await self.app(scope, _replay(b""), send)  # no POST route here takes a stranger: its 404 unread
        t0 = time.perf_counter()
        try:
            raw = await _read_body(receive, self.guard.max_body_bytes)
        except ApiError:
            return await _send_error(send, self.guard.too_large())
        if raw is None:
            return
        if handler is None:
            return await self.app(scope, _replay(raw), send)
        timing: dict[str, float] = {}
        headers: list[tuple[bytes, bytes]] = []
        try:
            result = await handler(self.app.state.serving, scope, raw, timing)
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
        async for chunk in result:  # SSE chunks, sent as the engine samples the tokens
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})


def _headers_only(send: Any) -> Any:
    """A `send` that passes the response's start and drops its body (the answer to a HEAD request)."""
    async def head_send(message: dict) -> None:
        if message["type"] == "http.response.body":
            message = {**message, "body": b""}
        await send(message)

    return head_send


def _replay(raw: bytes) -> Any:
    """A `receive` that hands the already-read body to the app once, then waits for a disconnect."""
    sent = False

    async def receive() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}
        await asyncio.Event().wait()  # like a client that keeps the connection open
        return {"type": "http.disconnect"}

    return receive
