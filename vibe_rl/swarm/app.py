"""`build_app(config)`: the swarm server's FastAPI app, its lifespan and error envelope.

Every HTTP error (validation, malformed JSON, unknown route, method, server
error) leaves in OpenAI's `{"error": {"message", "type", "param", "code"}}`
envelope, so the official SDKs raise the matching exception class.

The hot episode endpoints are answered by `vibe_rl.swarm.hotpath.HotPath`, a pure
ASGI front; `build_app` returns it wrapped around the FastAPI app.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from typing import Any

from vibe_rl.extras import require
from vibe_rl.swarm.config import ServerConfig
from vibe_rl.swarm.protocol import ApiError

log = logging.getLogger("vibe_rl.swarm")


def validation_error(errors: list[dict[str, Any]]) -> ApiError:
    message, param, code = _validation_message(errors)
    return ApiError(400, message, code=code, param=param)


def _validation_message(errors: list[dict[str, Any]]) -> tuple[str, str | None, str]:
    first = errors[0] if errors else {}
    if first.get("type") == "json_invalid":
        return (f"Malformed JSON body: {first.get('ctx', {}).get('error', 'cannot parse')}. "
                "Send a JSON object with Content-Type: application/json.", None, "invalid_json")
    parts, param = [], None
    for err in errors[:5]:
        loc = [str(x) for x in err.get("loc", ()) if x != "body"]
        param = param or (".".join(loc) or None)
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        parts.append(f"{'.'.join(loc) or 'body'}: {msg}")
    return "Invalid request: " + "; ".join(parts), param, "invalid_request"


def build_app(config: ServerConfig) -> Any:
    fastapi = require("fastapi", "the swarm server")
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException as StarletteHTTPException

    from vibe_rl.swarm import routers
    from vibe_rl.swarm.hotpath import HotPath
    from vibe_rl.swarm.serving import SwarmServing

    @contextlib.asynccontextmanager
    async def lifespan(app: Any):
        serving = SwarmServing(config)
        app.state.serving = serving
        reaper = asyncio.get_running_loop().create_task(serving.reap_forever())
        if config.boot_on_start and config.base_job is not None:
            await serving.start(None)
        try:
            yield
        finally:
            reaper.cancel()
            await serving.shutdown()

    app = fastapi.FastAPI(title="vibe-rl swarm server", lifespan=lifespan, docs_url=None, redoc_url=None)

    def envelope(err: ApiError) -> JSONResponse:
        return JSONResponse(err.body(), status_code=err.status, headers=err.headers())

    @app.exception_handler(ApiError)
    async def _api_error(request: Any, exc: ApiError) -> JSONResponse:
        return envelope(exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Any, exc: RequestValidationError) -> JSONResponse:
        message, param, code = _validation_message(list(exc.errors()))
        return envelope(ApiError(400, message, code=code, param=param))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Any, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 404:
            message = (f"No route {request.method} {request.url.path}. The swarm server serves /v1/chat/completions, "
                       "/v1/models, /episode/{begin,end,abort}, /control/{start,status,stop,traces}, /healthz.")
        else:
            message = str(exc.detail)
        return envelope(ApiError(exc.status_code, message, code=f"http_{exc.status_code}"))

    @app.exception_handler(Exception)
    async def _crash(request: Any, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        serving = getattr(request.app.state, "serving", None)
        if serving is not None:
            serving.errors.append(f"{request.method} {request.url.path}: {type(exc).__name__}: {exc}")
        return envelope(ApiError(500, f"Internal server error: {type(exc).__name__}: {exc}", code="internal_error"))

    for router in (routers.control, routers.openai, routers.misc):
        app.include_router(router)
    return HotPath(app)


def serve(config: ServerConfig) -> None:
    """Run the server in this process (blocking) until interrupted."""
    uvicorn = require("uvicorn", "the swarm server")
    sys.setswitchinterval(config.switch_interval)  # the event loop shares the GIL with the engine thread
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    uvicorn.run(build_app(config), host=config.host, port=config.port, log_level="warning",
                access_log=False, proxy_headers=False, timeout_graceful_shutdown=5)
