"""Thin FastAPI routers: parse, call the serving class, render. Errors are `ApiError`s
(raised by the serving layer) that the app turns into OpenAI's error envelope."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ValidationError

from vibe_rl.schema import TrainJob
from vibe_rl.swarm.protocol import (
    AbortEpisodeRequest,
    ApiError,
    BeginEpisodeRequest,
    ChatCompletionRequest,
    EndEpisodeRequest,
)
from vibe_rl.swarm.serving import SwarmServing


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


control = APIRouter(prefix="/control")


@control.post("/start")
async def start(request: Request) -> Response:
    data = await _optional_json(request)
    if isinstance(data, dict) and set(data) == {"job"}:
        data = data["job"]
    try:
        job = None if data is None else TrainJob.model_validate(data)
    except ValidationError as exc:
        raise ApiError(400, f"Invalid TrainJob: {exc}", code="invalid_job") from None
    return _json(await _serving(request).start(job))


@control.get("/status")
async def status(request: Request) -> Response:
    return _json(_serving(request).status())


@control.post("/stop")
async def stop(request: Request) -> Response:
    return _json(await _serving(request).stop())


@control.get("/traces")
async def traces(request: Request, limit: int = 200) -> Response:
    return _json(_serving(request).traces_view(limit))


# The hot endpoints (begin, chat, end, abort) are plain Starlette endpoints: they parse their
# body with pydantic directly, skipping FastAPI's per-request dependency solving (about a third
# of the server's CPU per call on a small machine). Errors still leave in the envelope.


def _parse(model: type[BaseModel], raw: bytes) -> Any:
    from vibe_rl.swarm.app import validation_error

    try:
        return model.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        raise validation_error(exc.errors()) from None


async def begin(request: Request) -> Response:
    body = _parse(BeginEpisodeRequest, await request.body())
    base_url = str(request.base_url).rstrip("/") + "/v1"
    return _json(_serving(request).begin(body.discard_episode_timeout, base_url).model_dump())


async def end(request: Request) -> Response:
    return _json(_serving(request).end(_parse(EndEpisodeRequest, await request.body())))


async def abort(request: Request) -> Response:
    return _json(_serving(request).abort(_parse(AbortEpisodeRequest, await request.body()).episode_uuid))


async def chat_completions(request: Request) -> Response:
    body = _parse(ChatCompletionRequest, await request.body())
    authorization = request.headers.get("authorization")
    key = authorization[7:].strip() if authorization and authorization[:7].lower() == "bearer " else authorization
    timing = request.scope.setdefault("state", {})  # the timing middleware reads engine_s here
    result = await _serving(request).chat(body, key, request.headers.get("x-player"), timing)
    if isinstance(result, dict):
        return _json(result)
    return StreamingResponse(result, media_type="text/event-stream")


HOT_ROUTES = [("/episode/begin", begin), ("/episode/end", end), ("/episode/abort", abort),
              ("/v1/chat/completions", chat_completions)]

openai = APIRouter(prefix="/v1")


@openai.get("/models")
async def models(request: Request) -> Response:
    return _json(_serving(request).models())


misc = APIRouter()


@misc.get("/healthz")
async def healthz(request: Request) -> JSONResponse:
    return JSONResponse({"ok": True, "state": _serving(request).state})
