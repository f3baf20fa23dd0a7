"""Request checks that run before any route: Host/Origin, content type, body size, credentials.

Called by `vibe_rl.swarm.server.front.Front` (the server's one ASGI app) for every HTTP
request, so control routes, hot routes and unknown routes are checked alike:

- `Host` must name this server: a loopback name when bound to loopback, the bind
  address or a loopback name or an `--allowed-host` when bound to one address; any
  host when bound to a wildcard address (0.0.0.0 / ::) unless `--allowed-host` lists
  some. A browser's `Origin`, when sent, must pass the same test (a wildcard bind
  accepts only the request's own Host as Origin). This stops DNS-rebinding pages.
- A POST with a body must say `Content-Type: application/json` (a cross-site form or
  `text/plain` "simple request" is refused with 415), come uncompressed (any Content-Encoding
  but identity: 415) and stay under `max_body_bytes` (413).
- `/control/*` and `/episode/begin` need the admin token (`Authorization: Bearer T`
  or `x-vibe-rl-token: T`), except the viewer's pages (GET `/control/ui...`), which also open with the session
  cookie of a one-time login link (`vibe-rl swarm ui`, `vibe_rl.swarm.server.login`); `/v1/models` needs the admin token or an episode key this server issued.
  `/episode/end|abort` and chat calls are checked by the serving layer (the episode's key,
  or the admin token for end/abort). `/healthz` needs none.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from vibe_rl.swarm.auth import bearer, is_loopback, is_wildcard, same_token
from vibe_rl.swarm.server.errors import ApiError

ADMIN_PATHS = ("/control/", "/episode/begin")
ADMIN_HEADER = b"x-vibe-rl-token"


def header(scope: dict, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None


def _hostname(value: str) -> str:
    """'example.com:8080' / '[::1]:80' / 'http://x:1' -> the lower-case host name."""
    if "//" not in value:
        value = "//" + value
    try:
        return (urlsplit(value).hostname or "").lower()
    except ValueError:
        return ""


VIEWER_PATH = "/control/ui"
LOGIN_PATH = "/control/ui/login"


class Guard:
    def __init__(self, bind_host: str, token: str, allowed_hosts: list[str], max_body_bytes: int, port: int = 0):
        from vibe_rl.swarm.server.login import Logins

        self.token, self.max_body_bytes = token, max_body_bytes
        self.logins = Logins(port)  # people's browser sessions of the viewer (/control/ui)
        self.any_host = is_wildcard(bind_host) and not allowed_hosts
        names = {h.lower().strip("[]") for h in allowed_hosts}
        if not is_wildcard(bind_host):
            names.add(bind_host.lower().strip("[]"))
        self.names = names

    def host_ok(self, name: str) -> bool:
        return bool(name) and (is_loopback(name) or name.strip("[]") in self.names)

    def is_admin(self, scope: dict) -> bool:
        return same_token(header(scope, ADMIN_HEADER), self.token) or \
            same_token(bearer(header(scope, b"authorization")), self.token)

    def check(self, scope: dict) -> ApiError | None:
        """None when the request may go on; else the error to answer. Sets scope['vibe_admin']."""
        host = _hostname(header(scope, b"host") or "")
        if not self.any_host and not self.host_ok(host):
            return ApiError(403, f"Host {host or '(none)'!r} is not this server's name; call it by its bind address "
                                 "(or start it with --allowed-host NAME).", code="host_not_allowed")
        origin = header(scope, b"origin")
        if origin is not None and origin != "null":
            name = _hostname(origin)
            if not (name == host if self.any_host else self.host_ok(name)):
                return ApiError(403, f"Cross-origin requests from {origin!r} are refused.", code="origin_not_allowed")
        elif origin == "null":
            return ApiError(403, "Requests with Origin: null are refused.", code="origin_not_allowed")
        if scope["method"] == "POST":
            length = header(scope, b"content-length")
            has_body = header(scope, b"transfer-encoding") is not None or (length not in (None, "0"))
            if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
                return self.too_large()
            coding = (header(scope, b"content-encoding") or "identity").strip().lower()
            if has_body and coding != "identity":  # read as JSON it would be "malformed" bytes
                return ApiError(415, f"Content-Encoding {coding!r} is not served: send the JSON body uncompressed "
                                     "(drop the Content-Encoding header).", code="unsupported_media_type")
            ctype = (header(scope, b"content-type") or "").split(";")[0].strip().lower()
            if has_body and ctype != "application/json" and not ctype.endswith("+json"):
                return ApiError(415, f"POST bodies must be JSON: send Content-Type: application/json "
                                     f"(got {ctype or 'none'!r}).", code="unsupported_media_type")
        admin = self.is_admin(scope)
        scope["vibe_admin"] = admin
        path = scope.get("path", "")
        if not admin and self.viewer_ok(scope, path):
            return None
        if not admin and path.startswith(ADMIN_PATHS):
            given = header(scope, ADMIN_HEADER) or bearer(header(scope, b"authorization"))
            return ApiError(401, ("The admin token is wrong. " if given else "This endpoint needs the server's admin "
                                  "token. ") + "Send `Authorization: Bearer <token>`; SwarmClient finds it itself on "
                                  "the same machine (or set VIBE_RL_SWARM_TOKEN / VIBE_RL_SWARM_TOKEN_FILE); the "
                                  "server keeps it in <experiment dir>/swarm.token.",
                            code="invalid_admin_token" if given else "missing_admin_token")
        return None

    def viewer_ok(self, scope: dict, path: str) -> bool:
        """A browser's GET of the viewer: the login link (its one-time code is checked by the route), or any page
        with a live session cookie. The cookie opens nothing else (the control API needs the token)."""
        if scope["method"] not in ("GET", "HEAD") or not (path == VIEWER_PATH or path.startswith(VIEWER_PATH + "/")):
            return False
        return path == LOGIN_PATH or self.logins.session_ok(header(scope, b"cookie"))

    def too_large(self) -> ApiError:
        return ApiError(413, f"The request body is larger than {self.max_body_bytes} bytes (max_body_bytes). Send "
                             "shorter conversations (keep recent turns) or smaller metadata.", code="body_too_large")
