"""The server's one front door: a plain ASGI app that checks, reads and dispatches every request.

For each HTTP request, in this order:
1. `vibe_rl.swarm.server.guard.Guard`: Host/Origin, the JSON content type, the declared body size, the admin
   token of `/control/*` and `/episode/begin` (sets `scope["vibe_admin"]`).
2. The route table (`routes.ROUTES`): an unknown path is a 404 that names the served ones (and the tidy path when
   a slash was doubled); a known path with another method a 405 with `Allow`; HEAD runs the GET route and drops
   the body.
3. Credentials before any byte of a body is read: a keyed route (end, abort, the two-phase end, model calls) and
   any `/v1/` path take the admin token or a key this server issued, so a stranger cannot make the server read
   and decode megabytes of JSON on its event loop.
4. The body, capped at `max_body_bytes` (413), then the handler. Its dict leaves as JSON, its `routes.Reply` as
   is, its async iterator as server-sent events; an `ApiError` leaves in OpenAI's envelope, anything else as a
   500 in the same envelope, logged and listed in the status's `errors`.

Model calls carry `x-vibe-engine-ms` (time inside the engine) and `x-vibe-server-ms` (from the request's arrival
to the response headers); the server's own overhead is the difference (benchmarks/swarm_overhead.py).
The ASGI lifespan runs `startup` and `shutdown` (the serving object's life: `app.build_app`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from vibe_rl.swarm.auth import bearer
from vibe_rl.swarm.server.errors import ApiError
from vibe_rl.swarm.server.guard import Guard, header
from vibe_rl.swarm.server.routes import ROUTES, Reply, Request, RouteTable

log = logging.getLogger("vibe_rl.swarm")

SERVED = ("/v1/chat/completions, /v1/completions, /v1/models, /episode/{begin,end,abort,prepare,commit,outcome}, "
          "/control/{start,status,stop,updates,traces,login,ui}, /healthz")


async def _send(send: Any, status: int, body: bytes, content_type: str,
                headers: list[tuple[bytes, bytes]] = (), head: bool = False) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": b"" if head else body})


def _encoded(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.lower().encode(), v.encode("latin-1")) for k, v in headers.items()]


async def _send_error(send: Any, err: ApiError, extra: list[tuple[bytes, bytes]] = (), head: bool = False) -> None:
    await _send(send, err.status, json.dumps(err.body()).encode(), "application/json",
                [*_encoded(err.headers()), *extra], head)


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


def not_found(method: str, path: str) -> ApiError:
    message = f"No route {method} {path}. The swarm server serves {SERVED} (docs/client.md, 'The HTTP endpoints')."
    tidy = "/" + "/".join(p for p in path.split("/") if p)
    if tidy != path:
        message += f" Did you mean {tidy}? (no doubled or trailing slash: join base_url and path with one '/')"
    return ApiError(404, message, code="http_404")


class Front:
    """The ASGI app (module docstring). `serving` is set by `startup` and cleared by nothing: a request that comes
    before the lifespan has started is answered 503."""

    def __init__(self, guard: Guard, startup: Callable[[Front], Awaitable[None]],
                 shutdown: Callable[[Front], Awaitable[None]]):
        self.guard, self.table = guard, RouteTable(ROUTES)
        self._startup, self._shutdown = startup, shutdown
        self.serving: Any = None

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await self._lifespan(receive, send)
        if scope["type"] != "http":  # no websockets here
            return None
        await self._http(scope, receive, send)

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self._startup(self)
                except Exception as exc:
                    log.exception("server start-up failed")
                    await send({"type": "lifespan.startup.failed", "message": f"{type(exc).__name__}: {exc}"})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self._shutdown(self)
                await send({"type": "lifespan.shutdown.complete"})
                return

    def _refusal(self, scope: dict, refused: ApiError) -> ApiError:
        """A 401 that says so when the credential sent to an admin endpoint is an episode's api_key (a common slip:
        reusing the last episode's key to begin the next one)."""
        keys = [header(scope, b"x-vibe-rl-token"), bearer(header(scope, b"authorization"))]
        if refused.code != "invalid_admin_token" or self.serving is None or \
                not any(k and self.serving.registry.knows_key(k) for k in keys):
            return refused
        return ApiError(401, f"{scope.get('path', '')} needs the server's admin token, and this is an episode's "
                             "api_key: an episode key only calls /v1 and ends or aborts its own episode. Send the "
                             "admin token (`Authorization: Bearer <token>`; SwarmClient finds it itself on the same "
                             "machine, else VIBE_RL_SWARM_TOKEN / VIBE_RL_SWARM_TOKEN_FILE; the server keeps it in "
                             "<experiment dir>/swarm.token).", code="invalid_admin_token")

    def _stranger(self, scope: dict, keyed: bool) -> ApiError | None:
        """None when the request's credential is the admin token or a key this server issued (a running episode's,
        or a gone one's: its route explains, 410); else the answer, from the headers alone."""
        key = bearer(header(scope, b"authorization"))
        if scope.get("vibe_admin") or (self.serving is not None and key and self.serving.registry.knows_key(key)):
            return None
        if not keyed or self.serving is None:
            return ApiError(401, "Send an episode's own API key (ep.api_key of swarm.episode(task), or "
                                 "begin_episode's; keys of a restarted server no longer work) or the admin token.",
                            code="invalid_api_key" if key else "missing_api_key")
        try:
            self.serving.registry.for_key(key)
        except ApiError as err:  # the same 'Missing API key' / 'Unknown API key' answers as a model call's
            if scope.get("path", "").startswith("/episode/"):
                err.message += " The admin token may also end or abort any episode."
            return err
        return None

    async def _http(self, scope: dict, receive: Any, send: Any) -> None:
        refused = self.guard.check(scope)
        if refused is not None:
            return await _send_error(send, self._refusal(scope, refused))
        method, path = scope["method"], scope.get("path", "")
        head = method == "HEAD"
        by_method, params = self.table.match(path)
        route = by_method.get("GET" if head else method)
        if path.startswith("/v1/") and not (route is not None and route.keyed):
            stranger = self._stranger(scope, keyed=False)  # /v1/models and unknown /v1 paths
            if stranger is not None:
                return await _send_error(send, stranger, head=head)
        if not by_method:
            return await _send_error(send, not_found(method, path), head=head)
        if route is None:
            allow = ", ".join(sorted(by_method))
            return await _send_error(send, ApiError(405, f"{path} takes {allow}, not {method}.",
                                                    code="method_not_allowed"), [(b"allow", allow.encode())], head)
        if route.keyed:
            stranger = self._stranger(scope, keyed=True)  # before a byte of the body is read or parsed
            if stranger is not None:
                return await _send_error(send, stranger)
        if self.serving is None:
            return await _send_error(send, ApiError(503, "The server is starting: retry in a moment.",
                                                    code="starting", retry_after=1.0))
        t0 = time.perf_counter()
        raw = b""
        if method == "POST":
            try:
                raw = await _read_body(receive, self.guard.max_body_bytes)
            except ApiError:
                return await _send_error(send, self.guard.too_large())
            if raw is None:
                return None
        req = Request(scope, raw, {}, self.guard.logins, params)
        extra: list[tuple[bytes, bytes]] = []
        try:
            result = await route.handler(self.serving, req)
            status = 200
        except ApiError as err:
            status, result, extra = err.status, err.body(), _encoded(err.headers())
        except Exception as exc:  # a handler's bug: reported through status, answered in the envelope
            log.exception("unhandled error on %s %s", method, path)
            self.serving.errors.append(f"{method} {path}: {type(exc).__name__}: {exc}")
            status = 500
            result = ApiError(500, f"Internal server error: {type(exc).__name__}: {exc}", code="internal_error").body()
        if "engine_s" in req.timing:
            extra += [(b"x-vibe-engine-ms", f"{req.timing['engine_s'] * 1000:.3f}".encode()),
                      (b"x-vibe-server-ms", f"{(time.perf_counter() - t0) * 1000:.3f}".encode())]
        if isinstance(result, dict):
            return await _send(send, status, json.dumps(result, ensure_ascii=False).encode(), "application/json",
                               extra, head)
        if isinstance(result, Reply):
            return await _send(send, result.status, result.body, result.content_type,
                               [*_encoded(result.headers), *extra], head)
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache"), *extra]})
        async for chunk in result:  # SSE chunks, sent as the engine samples the tokens
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
