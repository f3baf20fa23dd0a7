"""The swarm server's admin token: where it comes from, where it is kept, how clients find it.

Stdlib only (the light client imports it). The token guards the control plane
(`/control/*`) and `/episode/begin`; an episode's own key (from begin) guards its
chat calls and its `end`/`abort`.

The server takes its token from, in order: `--token` / `ServerConfig.token`, the
`VIBE_RL_SWARM_TOKEN` env var, an existing token file (`--token-file`, default
`<experiment dir>/swarm.token` when the experiment dir is known at start), or a
fresh `secrets.token_urlsafe(32)`. It writes it, mode 0600, to that token file (so a
restarted server keeps its token and running clients keep working) and to a per-user
registry entry for its port (`~/.cache/vibe-rl/swarm-tokens/port-<port>`, or under
`$VIBE_RL_CACHE_DIR`), which is how a `SwarmClient` on the same machine finds it.

A client takes, in order: an explicit `token=`, `VIBE_RL_SWARM_TOKEN`, the file named by
`VIBE_RL_SWARM_TOKEN_FILE`, and (only for a loopback URL) the registry entry of the
URL's port. A remote server's token is never guessed from local files.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
from pathlib import Path
from urllib.parse import urlsplit

from vibe_rl.errors import ConfigError

ENV_TOKEN = "VIBE_RL_SWARM_TOKEN"
ENV_TOKEN_FILE = "VIBE_RL_SWARM_TOKEN_FILE"
TOKEN_FILE_NAME = "swarm.token"
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1", "[::1]", "localhost.localdomain"})
MIN_TOKEN_CHARS = 16


def is_loopback(host: str) -> bool:
    """A loopback name or a loopback IP address (127.0.0.0/8, ::1). Exact: `127.0.0.1.attacker.example` is a DNS
    name anyone can point at 127.0.0.1 (DNS rebinding), so it is not loopback."""
    host = host.strip().lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_wildcard(host: str) -> bool:
    return host.strip() in ("0.0.0.0", "::", "[::]", "")


def registry_path(port: int) -> Path:
    root = Path(os.environ.get("VIBE_RL_CACHE_DIR") or Path.home() / ".cache" / "vibe-rl")
    return root / "swarm-tokens" / f"port-{int(port)}"


def write_secret(path: Path, token: str) -> None:
    """Write `token` to `path` with mode 0600 (parents created 0700), atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, (token + "\n").encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)


def read_secret(path: str | Path) -> str | None:
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return text or None


def check_token(token: str, where: str) -> str:
    if len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token) or not token.isprintable():
        raise ConfigError(f"The swarm admin token from {where} is too weak or malformed: use at least "
                          f"{MIN_TOKEN_CHARS} printable characters without spaces (or leave it unset and the "
                          "server generates one).")
    return token


def server_token(explicit: str | None, token_file: Path | None) -> tuple[str, str]:
    """(token, where it came from). Generates and persists one when none is given."""
    if explicit:
        return check_token(explicit, "--token"), "--token"
    if os.environ.get(ENV_TOKEN, "").strip():  # a blank variable counts as unset
        return check_token(os.environ[ENV_TOKEN].strip(), ENV_TOKEN), ENV_TOKEN
    if token_file is not None and Path(token_file).exists():
        found = read_secret(token_file)
        if found is None:
            raise ConfigError(f"Token file {token_file} is empty or unreadable; delete it (a new token is "
                              "generated) or write a token into it.")
        return check_token(found, str(token_file)), str(token_file)
    return secrets.token_urlsafe(32), "generated"


def same_token(given: str | None, expected: str) -> bool:
    return bool(given) and hmac.compare_digest(given.encode(), expected.encode())


def ensure_token_file(path: str | Path) -> Path:
    """A token file holding a token (a fresh one written 0600 when missing): one token for several servers."""
    path = Path(path)
    if read_secret(path) is None:
        write_secret(path, secrets.token_urlsafe(32))
    return path


def client_token(url: str, explicit: str | None = None, token_file: str | Path | None = None) -> str | None:
    """The admin token a client should send to `url`, or None when none is known."""
    if explicit and explicit.strip():
        return explicit.strip()
    if os.environ.get(ENV_TOKEN, "").strip():  # a blank variable counts as unset
        return os.environ[ENV_TOKEN].strip()
    if token_file is not None and read_secret(token_file):
        return read_secret(token_file)
    if os.environ.get(ENV_TOKEN_FILE):
        return read_secret(os.environ[ENV_TOKEN_FILE])
    parts = urlsplit(url if "//" in url else f"http://{url}")
    if parts.hostname and is_loopback(parts.hostname):
        return read_secret(registry_path(parts.port or 80))
    return None


def bearer(value: str | None) -> str | None:
    """The credential of an Authorization header (`Bearer X` or a bare `X`)."""
    if not value:
        return None
    return value[7:].strip() if value[:7].lower() == "bearer " else value.strip()
