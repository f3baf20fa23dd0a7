"""One root exception; each subclass also subclasses the stdlib type callers expect.

Every message says what was wrong and how to fix it.
"""

from __future__ import annotations

import re
from typing import Any

SECRET_FIELD = re.compile(r"key|token|secret|password", re.IGNORECASE)


class VibeRLError(Exception):
    """Root of every error vibe-rl raises on purpose."""


class ConfigError(VibeRLError, ValueError):
    """A config, spec or argument is invalid."""


class MissingExtraError(VibeRLError, ImportError):
    """An optional dependency is not installed."""

    def __init__(self, module: str, extra: str, purpose: str = ""):
        why = f" (needed for {purpose})" if purpose else ""
        super().__init__(
            f"Python package '{module}' is not installed{why}. "
            f"Install the extra: pip install 'vibe-rl[{extra}]'"
        )
        self.module, self.extra = module, extra


class ModelLoadError(VibeRLError, ValueError):
    """A model directory is missing or is not a causal language model."""


class SequenceTooLongError(VibeRLError, ValueError):
    """A prompt or sample exceeds the model's maximum length."""


class EngineError(VibeRLError, RuntimeError):
    """The engine failed while generating or training."""


class RequestRejectedError(EngineError):
    """One generation request cannot run (e.g. it needs more KV cache than exists); the others are unaffected."""


class SwarmError(VibeRLError, RuntimeError):
    """A swarm server call failed; the message carries the server's explanation."""


class TemplateError(VibeRLError, ValueError):
    """A template family is missing, malformed, or cannot render a spec."""


class PlannerError(VibeRLError, ValueError):
    """A spec could not be turned into a TaskSpec."""


def field_errors(exc: Any, limit: int = 5) -> str:
    """A pydantic ValidationError as one line, one clause per field, the way every message shows it:
    'train.batch_size: input should be greater than or equal to 1 (got -4); model.path: field required'.

    The value given is repeated unless it is a mapping or a list (too long) or the field holds a secret
    (its name says key, token, secret or password); documentation links are left out."""
    errors = exc.errors(include_url=False)
    parts = []
    for err in errors[:limit]:
        loc = ".".join(str(x) for x in err.get("loc", ()) if x != "body")
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        msg = msg[:1].lower() + msg[1:]
        value = err.get("input")
        shown = err.get("type") != "missing" and not isinstance(value, (dict, list)) and not SECRET_FIELD.search(loc)
        given = repr(value[:80] if isinstance(value, str) else value)[:90]
        parts.append(f"{loc or '(top level)'}: {msg}" + (f" (got {given})" if shown else ""))
    more = f"; and {len(errors) - limit} more" if len(errors) > limit else ""
    return "; ".join(parts) + more
