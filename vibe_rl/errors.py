"""One root exception; each subclass also subclasses the stdlib type callers expect.

Every message says what was wrong and how to fix it.
"""

from __future__ import annotations


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
