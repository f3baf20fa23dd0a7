"""A deadline for request headers, which uvicorn does not have.

uvicorn arms its keep-alive timer only after a response and cancels it on the first byte of the next request, so
a client that opens connections and sends headers slowly (or not at all) holds each one open forever; a thousand
of them use up the process's file descriptors. `header_deadline_protocol` wraps uvicorn's HTTP protocol class:
every connection must deliver a request's headers within `seconds` of its opening or of its previous response;
one that has not is closed. A request whose headers arrived is never cut (a long chat call runs as long as it
takes)."""

from __future__ import annotations

from typing import Any


def header_deadline_protocol(seconds: float) -> type:
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    class HeaderDeadlineProtocol(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
        _vibe_timer: Any = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._vibe_arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._vibe_cancel()
            super().connection_lost(exc)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._vibe_arm()  # the next request's headers are due within `seconds` too

        def _vibe_arm(self) -> None:
            self._vibe_cancel()
            self._vibe_timer = self.loop.call_later(seconds, self._vibe_expire)

        def _vibe_cancel(self) -> None:
            if self._vibe_timer is not None:
                self._vibe_timer.cancel()
                self._vibe_timer = None

        def _vibe_expire(self) -> None:
            self._vibe_timer = None
            cycle = getattr(self, "cycle", None)
            waiting = cycle is None or cycle.response_complete  # no request whose headers came is being served
            if waiting and not self.transport.is_closing():
                self.transport.close()

    return HeaderDeadlineProtocol
