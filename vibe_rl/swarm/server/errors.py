"""The server's error value and how a pydantic validation error becomes one.

`ApiError` is what serving returns (or raises) and every front renders as OpenAI's
`{"error": {"message", "type", "param", "code"}}` envelope, so the official SDKs raise the
matching exception class. `validation_error` turns pydantic's error list into one such 400;
every route's body and query parsing (`routes`) shares it.
"""

from __future__ import annotations

from typing import Any

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    409: "conflict_error",
    410: "invalid_request_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    503: "service_unavailable",
}


class ApiError(Exception):
    """An error value the serving layer returns (or raises) and the app renders as
    OpenAI's `{"error": {"message", "type", "param", "code"}}` envelope."""

    def __init__(self, status: int, message: str, code: str | None = None, param: str | None = None,
                 retry_after: float | None = None):
        super().__init__(message)
        self.status, self.message, self.code, self.param = status, message, code, param
        self.retry_after = retry_after

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": ERROR_TYPES.get(self.status, "invalid_request_error"),
                          "param": self.param, "code": self.code}}

    def headers(self) -> dict[str, str]:
        if self.retry_after is None:
            return {}
        # Retry-After is whole seconds by the spec; the openai SDK prefers retry-after-ms.
        return {"Retry-After": str(max(1, round(self.retry_after))),
                "retry-after-ms": str(int(self.retry_after * 1000))}


def validation_error(errors: list[dict[str, Any]]) -> ApiError:
    message, param, code = _validation_message(errors)
    return ApiError(400, message, code=code, param=param)


def _validation_message(errors: list[dict[str, Any]]) -> tuple[str, str | None, str]:
    first = errors[0] if errors else {}
    if first.get("type") == "json_invalid":
        error = str(first.get("ctx", {}).get("error", "cannot parse"))
        hint = ("Send a JSON object with Content-Type: application/json." if not any(
            w in error for w in ("escape", "surrogate", "unicode")) else
            "A string holds bytes or an escape that is not Unicode text (e.g. a lone UTF-16 surrogate such as \\ud800, "
            "left by text cut mid-character): send UTF-8, and clean such text first (Python: "
            "text.encode('utf-8', 'replace').decode()).")
        return f"Malformed JSON body: {error}. {hint}", None, "invalid_json"
    parts, param = [], None
    for err in errors[:5]:
        loc = [str(x) for x in err.get("loc", ()) if x != "body"]
        param = param or (".".join(loc) or None)
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        parts.append(f"{'.'.join(loc) or 'body'}: {msg}")
    return "Invalid request: " + "; ".join(parts), param, "invalid_request"
