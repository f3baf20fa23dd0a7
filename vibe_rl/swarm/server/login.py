"""One login for people: a one-time login link that sets a session cookie, for the trace viewers.

The admin token is for programs (a header). A person opens the viewer in a browser, which cannot send a
header, and a token in a URL would end up in the browser's history, in logs and in Referer headers. So:

- `vibe-rl swarm ui` (asking the server with the admin token) and `vibe-rl traces serve` (at its start) print a
  login link holding a one-time code: random (256 bits), valid for `CODE_TTL_S`, used once.
- Opening it sets an HttpOnly, SameSite=Strict session cookie (random, kept by the server, valid for
  `SESSION_TTL_S`) and redirects to the viewer, so the code leaves the address bar at once.
- The cookie opens the viewer's pages (GET) and nothing else: the control API still needs the admin token.
- Viewer pages carry a strict Content-Security-Policy, X-Frame-Options DENY, no-referrer and no-store.

Stdlib only (used by the stdlib `traces serve` server and by the swarm server's guard).
"""

from __future__ import annotations

import hashlib
import secrets
import time
from http.cookies import CookieError, SimpleCookie

CODE_TTL_S = 600.0
SESSION_TTL_S = 12 * 3600.0
MAX_OPEN = 1000  # codes and sessions kept at most (the oldest go first)

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


class Logins:
    """One-time login codes and the sessions they open (kept as hashes, in memory: a restart logs people out)."""

    def __init__(self, port: int, code_ttl: float = CODE_TTL_S, session_ttl: float = SESSION_TTL_S):
        self.cookie_name = f"vibe_rl_session_{int(port)}"  # cookies ignore ports: one name per server
        self.code_ttl, self.session_ttl = code_ttl, session_ttl
        self._codes: dict[str, float] = {}
        self._sessions: dict[str, float] = {}

    @staticmethod
    def _prune(table: dict[str, float], now: float) -> None:
        for key in [k for k, until in table.items() if until <= now]:
            del table[key]
        while len(table) > MAX_OPEN:
            del table[next(iter(table))]

    def issue_code(self) -> str:
        code = secrets.token_urlsafe(32)
        now = time.monotonic()
        self._codes[_digest(code)] = now + self.code_ttl
        self._prune(self._codes, now)
        return code

    def redeem(self, code: str | None) -> str | None:
        """A new session id for a valid, unused, unexpired code (which is used up), else None."""
        if not code:
            return None
        now = time.monotonic()
        until = self._codes.pop(_digest(code), None)
        if until is None or until <= now:
            return None
        session = secrets.token_urlsafe(32)
        self._sessions[_digest(session)] = now + self.session_ttl
        self._prune(self._sessions, now)
        return session

    def session_ok(self, cookie_header: str | None) -> bool:
        """Whether a Cookie header holds a live session of this server."""
        if not cookie_header:
            return False
        try:
            jar = SimpleCookie(cookie_header)
        except CookieError:
            return False
        morsel = jar.get(self.cookie_name)
        if morsel is None or not morsel.value:
            return False
        until = self._sessions.get(_digest(morsel.value))
        return until is not None and until > time.monotonic()

    def set_cookie(self, session: str, path: str) -> str:
        """The Set-Cookie value of a new session."""
        return (f"{self.cookie_name}={session}; Path={path}; Max-Age={int(self.session_ttl)}; HttpOnly; "
                "SameSite=Strict")


def login_page(how: str) -> str:
    """The page a browser without a session gets (401): how to get a login link."""
    import html

    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>login needed</title></head><body>"
            f"<h1>Login needed</h1><p>{html.escape(how)}</p></body></html>")
