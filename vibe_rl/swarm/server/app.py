"""`build_app(config)`: the swarm server's ASGI app and its lifespan; `serve(config)` runs it under uvicorn.

The app is `vibe_rl.swarm.server.front.Front`, the one front door: `Guard` on every request, then the route table
of `vibe_rl.swarm.server.routes` (every endpoint, typed bodies and queries). Every HTTP error (validation,
malformed JSON, unknown route, method, server error) leaves in OpenAI's
`{"error": {"message", "type", "param", "code"}}` envelope, so the official SDKs raise the matching exception
class.

The admin token (`vibe_rl.swarm.auth`) is resolved by `resolve_token` before the app
is built; the lifespan writes it (0600) to the token file and to this port's registry
entry, and removes the registry entry on a clean shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import Any

from vibe_rl.errors import ConfigError
from vibe_rl.extras import require
from vibe_rl.swarm import auth
from vibe_rl.swarm.server.config import ServerConfig
from vibe_rl.swarm.server.errors import ApiError

log = logging.getLogger("vibe_rl.swarm")


def token_file(config: ServerConfig) -> Path | None:
    """Where the admin token is kept: --token-file, else <experiment dir>/swarm.token when known at start."""
    if config.token_file:
        return Path(config.token_file)
    exp = config.experiment_dir or (config.base_job.experiment.dir if config.base_job is not None else None)
    return Path(exp) / auth.TOKEN_FILE_NAME if exp else None


def resolve_token(config: ServerConfig) -> tuple[str, str]:
    """(token, source). Refuses a non-loopback bind without a token chosen by the operator."""
    explicit = config.token.get_secret_value() if config.token is not None else None
    token, source = auth.server_token(explicit, token_file(config))
    if source == "generated" and not auth.is_loopback(config.host):
        raise ConfigError(f"--host {config.host} exposes the server beyond this machine, so it needs a token you "
                          "chose: pass --token-file FILE (or set VIBE_RL_SWARM_TOKEN) and give the same token to "
                          "the clients.")
    return token, source


def _write_token(config: ServerConfig, token: str) -> list[Path]:
    written = []
    for path in (token_file(config), auth.registry_path(config.port)):
        if path is None:
            continue
        try:
            if auth.read_secret(path) != token or path.stat().st_mode & 0o077:
                auth.write_secret(path, token)
            written.append(path)
        except OSError as exc:
            log.warning("could not write the admin token to %s: %s", path, exc)
    return written


def build_app(config: ServerConfig, token: str | None = None) -> Any:
    """The ASGI app (`front.Front`). `token`: the admin token (default: `resolve_token(config)`)."""
    if token is None:
        token = resolve_token(config)[0]
    from vibe_rl.swarm.server.front import Front
    from vibe_rl.swarm.server.guard import Guard
    from vibe_rl.swarm.server.serving import SwarmServing

    written: list[Path] = []
    reaper: list[asyncio.Task] = []

    async def startup(front: Front) -> None:
        serving = SwarmServing(config)
        front.serving = serving
        written.extend(_write_token(config, token))
        reaper.append(asyncio.get_running_loop().create_task(serving.reap_forever()))
        if config.boot_on_start and config.base_job is not None:
            try:
                await serving.start(None)
            except ApiError as err:  # a job the server refuses: reported like a failed boot, state OFFLINE
                serving.errors.append(f"engine boot failed: {err.message}")
                print(f"error: the --config job was refused: {err.message}", flush=True)

    async def shutdown(front: Front) -> None:
        for task in reaper:
            task.cancel()
        if front.serving is not None:
            await front.serving.shutdown()
        registry = auth.registry_path(config.port)
        if registry in written and auth.read_secret(registry) == token:
            registry.unlink(missing_ok=True)

    guard = Guard(config.host, token, config.allowed_hosts, config.max_body_bytes, config.port)
    return Front(guard, startup, shutdown)


def serve(config: ServerConfig) -> None:
    """Run the server in this process (blocking) until interrupted."""
    uvicorn = require("uvicorn", "the swarm server")
    sys.setswitchinterval(config.switch_interval)  # the event loop shares the GIL with the engine thread
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    token, source = resolve_token(config)
    where = token_file(config)
    print(f"admin token: {'generated' if source == 'generated' else 'from ' + source}; kept in "
          f"{where or 'memory'} and {auth.registry_path(config.port)} (mode 0600)", flush=True)
    from vibe_rl.swarm.server.conn_timeouts import header_deadline_protocol

    uvicorn.run(build_app(config, token), host=config.host, port=config.port, log_level="warning",
                access_log=False, proxy_headers=False, timeout_graceful_shutdown=5,
                http=header_deadline_protocol(config.header_timeout), timeout_keep_alive=config.keep_alive_timeout,
                h11_max_incomplete_event_size=64 * 1024)
