"""Every endpoint of the swarm server in one table: (method, path) -> a typed handler.

A handler is `async (serving, request) -> result`: a JSON-able dict, a `Reply` (an HTML page, a redirect) or an
async iterator of SSE chunks (a streamed completion). It raises `ApiError` for every error. Bodies parse into the
protocol's pydantic models (`vibe_rl.swarm.protocol`), query strings into the models below, and both answer a bad
value with the same 400 envelope. `vibe_rl.swarm.server.front.Front` checks, reads and dispatches; no HTTP
plumbing lives here.

    POST /episode/begin|end|abort          the episode lifecycle (begin: admin token; end/abort: its key or admin)
    POST /episode/prepare|commit|outcome   the two-phase end (`txn.py`)
    POST /v1/chat/completions, /v1/completions   model calls (an episode's key)
    GET  /v1/models, /v1/models/{id}       the served models (an episode's key or admin)
    POST /control/start|stop|login, GET /control/status|updates|traces|ui[/...]   control (admin token)
    GET  /healthz                          liveness (no credential)
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from pydantic import BaseModel, Field, ValidationError

from vibe_rl.config import unknown_keys
from vibe_rl.schema import TrainJob
from vibe_rl.swarm.auth import bearer
from vibe_rl.swarm.protocol import (
    AbortEpisodeRequest,
    BeginEpisodeRequest,
    ChatCompletionRequest,
    CompletionRequest,
    EndEpisodeRequest,
    PrepareEpisodeRequest,
    TxnEpisodeRequest,
)
from vibe_rl.swarm.server.errors import ApiError, validation_error
from vibe_rl.swarm.server.guard import header


@dataclass
class Request:
    """One request as a handler sees it: the ASGI scope, the whole body (POST), timings to report, the viewer's
    login links."""

    scope: dict
    raw: bytes = b""
    timing: dict[str, float] = field(default_factory=dict)
    logins: Any = None
    params: dict[str, str] = field(default_factory=dict)  # the path's tail of a prefix route

    def header(self, name: bytes) -> str | None:
        return header(self.scope, name)

    @property
    def credential(self) -> str | None:
        return bearer(self.header(b"authorization"))

    @property
    def admin(self) -> bool:
        return bool(self.scope.get("vibe_admin"))

    @property
    def origin(self) -> str:
        host = self.header(b"host")  # the guard has checked it names this server
        if not host:
            server = self.scope.get("server") or ("127.0.0.1", 80)
            host = f"{server[0]}:{server[1]}"
        return f"{self.scope.get('scheme', 'http')}://{host}"

    @property
    def query_params(self) -> dict[str, str]:
        return dict(parse_qsl(self.scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True))

    def query(self, model: type[BaseModel]) -> Any:
        try:
            return model.model_validate(self.query_params)
        except ValidationError as exc:
            raise validation_error(exc.errors()) from None

    def body(self, model: type[BaseModel]) -> Any:
        try:
            return model.model_validate_json(self.raw or b"{}")
        except ValidationError as exc:
            raise validation_error(exc.errors()) from None
        except OverflowError as exc:  # e.g. a reward of 10**400: an int too large for a float
            raise ApiError(400, f"A number in the body is out of range ({exc}). Send numbers that fit a 64-bit "
                                "float (rewards: |reward| <= ServerConfig.max_abs_reward, 1e6 by default).",
                           code="number_out_of_range") from None
        except (RecursionError, ValueError) as exc:  # nesting beyond the parser's limit
            raise ApiError(400, f"Malformed JSON body: {type(exc).__name__}.", code="invalid_json") from None


@dataclass
class Reply:
    """A response that is not JSON (an HTML page, a redirect)."""

    status: int
    body: bytes
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Any, Request], Awaitable[Any]]


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    handler: Handler
    prefix: bool = False  # `path` and everything below it ("/control/ui" serves "/control/ui/episodes/...")
    keyed: bool = False  # takes an episode's key (or the admin token): checked before the body is read


class UpdatesQuery(BaseModel):
    since: int = Field(default=0, description="Updates after this global step")
    limit: int = Field(default=1000, description="At most this many, oldest first")


class TracesQuery(BaseModel):
    limit: int = Field(default=200, description="The newest this many model calls")


# ------------------------------------------------------------------ episodes and model calls


async def begin(serving: Any, req: Request) -> Any:
    body = req.body(BeginEpisodeRequest)
    return serving.begin(body.discard_episode_timeout, req.origin + "/v1", kind=body.kind,
                         group=body.group).model_dump()


async def end(serving: Any, req: Request) -> Any:
    return await serving.end(req.body(EndEpisodeRequest), req.credential, req.admin)


async def abort(serving: Any, req: Request) -> Any:
    return await serving.abort(req.body(AbortEpisodeRequest).episode_uuid, req.credential, req.admin)


async def prepare(serving: Any, req: Request) -> Any:
    return await serving.txns.prepare(req.body(PrepareEpisodeRequest), req.credential, req.admin)


async def commit(serving: Any, req: Request) -> Any:
    return await serving.txns.commit(req.body(TxnEpisodeRequest), req.credential, req.admin)


async def outcome(serving: Any, req: Request) -> Any:
    return await serving.txns.outcome(req.body(TxnEpisodeRequest), req.credential, req.admin)


def _episode_key(serving: Any, req: Request) -> str | None:
    """The episode key of a model call; the admin token is refused with its own explanation."""
    key = req.credential
    if req.admin and key not in serving.registry.by_key:
        raise ApiError(401, "The admin token does not call models: each model call goes through an episode. Begin "
                            "one (swarm.episode(task) / POST /episode/begin) and send its api_key "
                            "(Authorization: Bearer <api_key>).", code="invalid_api_key")
    return key


async def chat(serving: Any, req: Request) -> Any:
    body = req.body(ChatCompletionRequest)
    req.timing["request_bytes"] = len(req.raw)  # counted against the episode's max_episode_bytes
    return await serving.chat(body, _episode_key(serving, req), req.header(b"x-player"), req.timing)


async def completions(serving: Any, req: Request) -> Any:
    from vibe_rl.swarm.server.completions import complete

    return await complete(serving, req.body(CompletionRequest), _episode_key(serving, req),
                          req.header(b"x-player"), req.timing)


async def models(serving: Any, req: Request) -> Any:
    return serving.models()


async def model(serving: Any, req: Request) -> Any:
    model_id = req.params.get("rest", "")
    listed = serving.models()["data"]
    for card in listed:
        if card["id"] == model_id:
            return card
    raise ApiError(404, f"The model '{model_id}' does not exist on this server. Served models: "
                        f"{[c['id'] for c in listed]}.", code="model_not_found", param="model")


# ------------------------------------------------------------------ control


def _optional_json(raw: bytes) -> Any:
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ApiError(400, f"Malformed JSON body: {exc.msg} at line {exc.lineno} column {exc.colno}.",
                       code="invalid_json") from None
    except (RecursionError, UnicodeDecodeError) as exc:  # nesting beyond the parser's limit, bad bytes
        raise ApiError(400, f"Malformed JSON body ({type(exc).__name__}): send a plain JSON object.",
                       code="invalid_json") from None


async def start(serving: Any, req: Request) -> Any:
    data = _optional_json(req.raw)
    if isinstance(data, dict) and set(data) == {"job"}:
        data = data["job"]
    if data is not None and not isinstance(data, dict):
        raise ApiError(400, f"The body must be a TrainJob as a JSON object (or {{\"job\": {{...}}}}), not "
                            f"{type(data).__name__}.", code="invalid_job")
    unknown = unknown_keys(TrainJob, data)
    if unknown:
        raise ApiError(400, f"Unknown TrainJob fields: {', '.join(unknown[:10])}. Check their spelling against the "
                            "job reference (docs/client.md, 'The job'); nothing was started.", code="invalid_job",
                       param=unknown[0])
    try:
        job = None if data is None else TrainJob.model_validate(data)
    except ValidationError as exc:
        err = validation_error(exc.errors())
        raise ApiError(400, err.message.replace("Invalid request:", "Invalid TrainJob:", 1), code="invalid_job",
                       param=err.param) from None
    return (await serving.start(job)).model_dump(mode="json")


async def status(serving: Any, req: Request) -> Any:
    return serving.status().model_dump(mode="json")


async def stop(serving: Any, req: Request) -> Any:
    return (await serving.stop()).model_dump(mode="json")


async def updates(serving: Any, req: Request) -> Any:
    query = req.query(UpdatesQuery)
    since = max(-1, min(query.since, 2**63 - 1))  # SQLite integers are 64-bit; a larger `since` has no rows anyway
    return serving.updates_view(since, query.limit)


async def traces(serving: Any, req: Request) -> Any:
    return serving.traces_view(req.query(TracesQuery).limit)


async def login_link(serving: Any, req: Request) -> Any:
    """A one-time login link of the viewer (admin token required, like every control route): `vibe-rl swarm ui`."""
    code = req.logins.issue_code()
    return {"login_url": f"{req.origin}/control/ui/login?code={code}", "expires_in_s": req.logins.code_ttl}


async def ui(serving: Any, req: Request) -> Any:
    """The trace viewer (vibe_rl.swarm.observe.ui) over this server's experiment dir: the admin token, or the
    session cookie of a one-time login link (`vibe-rl swarm ui`)."""
    from vibe_rl.swarm.observe.ui import page
    from vibe_rl.swarm.server.login import SECURITY_HEADERS, login_page

    rest = req.params.get("rest", "")
    query = req.query_params
    if rest.rstrip("/") == "login":
        session = req.logins.redeem(query.get("code"))
        if session is None:
            body = login_page("This login link is unknown, used or expired. Get a new one with `vibe-rl swarm ui "
                              "--url URL` (it asks the server with the admin token) and open it once.")
            return Reply(401, body.encode(), headers=SECURITY_HEADERS)
        return Reply(303, b"", headers={**SECURITY_HEADERS, "Location": "/control/ui",
                                        "Set-Cookie": req.logins.set_cookie(session, "/control/ui")})
    if serving.job is None:
        raise ApiError(503, "The engine is OFFLINE: no experiment to show yet. Start it first.", code="engine_offline")
    # off the event loop: a large episode's page takes a while to read and render, /healthz must not wait
    code, body = await asyncio.to_thread(page, serving.job.experiment.dir, "/control/ui", "/" + rest if rest else "",
                                         query)
    return Reply(code, body.encode(), headers=SECURITY_HEADERS)


async def healthz(serving: Any, req: Request) -> Any:
    return {"ok": True, "state": serving.state}


ROUTES = [
    Route("POST", "/episode/begin", begin),
    *(Route("POST", path, fn, keyed=True) for path, fn in (
        ("/episode/end", end), ("/episode/abort", abort), ("/episode/prepare", prepare),
        ("/episode/commit", commit), ("/episode/outcome", outcome),
        ("/v1/chat/completions", chat), ("/v1/completions", completions))),
    Route("GET", "/v1/models", models),
    Route("GET", "/v1/models", model, prefix=True),
    Route("POST", "/control/start", start),
    Route("GET", "/control/status", status),
    Route("POST", "/control/stop", stop),
    Route("GET", "/control/updates", updates),
    Route("GET", "/control/traces", traces),
    Route("POST", "/control/login", login_link),
    Route("GET", "/control/ui", ui, prefix=True),
    Route("GET", "/healthz", healthz),
]


class RouteTable:
    """Exact paths first, then prefix routes (`/v1/models/{id}`, `/control/ui/{rest}`)."""

    def __init__(self, routes: list[Route]):
        self.exact: dict[str, dict[str, Route]] = {}
        self.prefixes: dict[str, dict[str, Route]] = {}
        for r in routes:
            (self.prefixes if r.prefix else self.exact).setdefault(r.path, {})[r.method] = r

    def match(self, path: str) -> tuple[dict[str, Route], dict[str, str]]:
        """The routes of `path` by method (empty when none), and the prefix route's tail as `rest`."""
        found = self.exact.get(path)
        if found is not None:
            return found, {}
        for prefix, by_method in self.prefixes.items():
            if path == prefix or path.startswith(prefix + "/"):
                return by_method, {"rest": path[len(prefix) + 1:]}
        return {}, {}

    def listing(self) -> list[tuple[str, str]]:
        """(method, path) of every route, a prefix route as `path/{rest}`."""
        return [(r.method, r.path + "/{rest}" if r.prefix else r.path)
                for table in (self.exact, self.prefixes) for by_method in table.values() for r in by_method.values()]
