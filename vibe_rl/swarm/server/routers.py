"""Thin FastAPI routers: parse, call the serving class, render. Errors are `ApiError`s
(raised by the serving layer) that the app turns into OpenAI's error envelope."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from vibe_rl.config import unknown_keys
from vibe_rl.schema import TrainJob
from vibe_rl.swarm.server.errors import ApiError, validation_error
from vibe_rl.swarm.server.serving import SwarmServing


def _serving(request: Request) -> SwarmServing:
    return request.app.state.serving


def _json(body: Any, status: int = 200) -> Response:
    return Response(json.dumps(body, ensure_ascii=False).encode(), status_code=status, media_type="application/json")


async def _optional_json(request: Request) -> Any:
    raw = await request.body()
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


control = APIRouter(prefix="/control")


@control.post("/start")
async def start(request: Request) -> Response:
    data = await _optional_json(request)
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
    return _json((await _serving(request).start(job)).model_dump(mode="json"))


@control.get("/status")
async def status(request: Request) -> Response:
    return _json(_serving(request).status().model_dump(mode="json"))


@control.post("/stop")
async def stop(request: Request) -> Response:
    return _json((await _serving(request).stop()).model_dump(mode="json"))


@control.get("/updates")
async def updates(request: Request, since: int = 0, limit: int = 1000) -> Response:
    since = max(-1, min(since, 2**63 - 1))  # SQLite integers are 64-bit; a larger `since` has no rows anyway
    return _json(_serving(request).updates_view(since, limit))


@control.post("/login")
async def login_link(request: Request) -> Response:
    """A one-time login link of the viewer (admin token required, like every control route): `vibe-rl swarm ui`."""
    code = request.app.state.logins.issue_code()
    base = f"{request.url.scheme}://{request.headers.get('host') or request.url.netloc}"
    return _json({"login_url": f"{base}/control/ui/login?code={code}", "expires_in_s": request.app.state.logins.code_ttl})


def _viewer_login(request: Request) -> Response:
    from vibe_rl.swarm.server.login import SECURITY_HEADERS, login_page

    logins = request.app.state.logins
    session = logins.redeem(request.query_params.get("code"))
    if session is None:
        body = login_page("This login link is unknown, used or expired. Get a new one with `vibe-rl swarm ui --url "
                          "URL` (it asks the server with the admin token) and open it once.")
        return Response(body.encode(), status_code=401, media_type="text/html; charset=utf-8", headers=SECURITY_HEADERS)
    return Response(b"", status_code=303, headers={**SECURITY_HEADERS, "Location": "/control/ui",
                                                   "Set-Cookie": logins.set_cookie(session, "/control/ui")})


@control.get("/ui")
@control.get("/ui/{rest:path}")
async def ui(request: Request, rest: str = "") -> Response:
    """The trace viewer (vibe_rl.swarm.observe.ui) over this server's experiment dir: the admin token, or the session
    cookie of a one-time login link (`vibe-rl swarm ui`)."""
    from vibe_rl.swarm.observe.ui import page
    from vibe_rl.swarm.server.login import SECURITY_HEADERS

    if rest.rstrip("/") == "login":
        return _viewer_login(request)
    job = _serving(request).job
    if job is None:
        raise ApiError(503, "The engine is OFFLINE: no experiment to show yet. Start it first.", code="engine_offline")
    # off the event loop: a large episode's page takes a while to read and render, /healthz must not wait
    status, body = await asyncio.to_thread(page, job.experiment.dir, "/control/ui", "/" + rest if rest else "",
                                           dict(request.query_params))
    return Response(body.encode(), status_code=status, media_type="text/html; charset=utf-8", headers=SECURITY_HEADERS)


@control.get("/traces")
async def traces(request: Request, limit: int = 200) -> Response:
    return _json(_serving(request).traces_view(limit))


# The hot endpoints (begin, chat, end, abort, prepare, commit, outcome) live in `vibe_rl.swarm.server.hotpath`.

openai = APIRouter(prefix="/v1")


@openai.get("/models")
async def models(request: Request) -> Response:
    return _json(_serving(request).models())


@openai.get("/models/{model_id:path}")
async def model(request: Request, model_id: str) -> Response:
    listed = _serving(request).models()["data"]
    for card in listed:
        if card["id"] == model_id:
            return _json(card)
    raise ApiError(404, f"The model '{model_id}' does not exist on this server. Served models: "
                        f"{[c['id'] for c in listed]}.", code="model_not_found", param="model")


misc = APIRouter()


@misc.get("/healthz")
async def healthz(request: Request) -> JSONResponse:
    return JSONResponse({"ok": True, "state": _serving(request).state})
