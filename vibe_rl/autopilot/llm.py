"""The LLM that proposes fixes: the official OpenAI or Anthropic SDK, chosen by env vars.

- VIBE_RL_FIX_PROVIDER: 'openai' or 'anthropic' (default: whichever key is set; OpenAI first)
- VIBE_RL_FIX_MODEL: the model name (default: gpt-4o-mini / claude-sonnet-4-5)
- OPENAI_API_KEY, OPENAI_BASE_URL (any OpenAI-compatible server) / ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL
Keys are handed to the SDK and never printed; `describe()` shows provider, model and host only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Protocol
from urllib.parse import urlparse

from vibe_rl.errors import ConfigError
from vibe_rl.extras import require

DEFAULT_MODEL = {"openai": "gpt-4o-mini", "anthropic": "claude-sonnet-4-5"}


class FixLLM(Protocol):
    def complete(self, system: str, prompt: str) -> str: ...

    def describe(self) -> str: ...


class OpenAIFixLLM:
    def __init__(self, model: str, base_url: str | None, api_key: str | None, timeout: float = 120.0):
        openai = require("openai", "the autopilot's fix loop")
        self.model, self.base_url = model, base_url
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key or "not-needed", timeout=timeout,
                                     max_retries=2)

    def complete(self, system: str, prompt: str) -> str:
        reply = self._client.chat.completions.create(
            model=self.model, temperature=0,
            messages=[{"role": "system", "content": system}, {"role": "user", "content": prompt}])
        return reply.choices[0].message.content or ""

    def describe(self) -> str:
        host = _host(self.base_url) if self.base_url else "api.openai.com"
        return f"openai:{self.model} @ {host}"


class AnthropicFixLLM:
    def __init__(self, model: str, base_url: str | None, api_key: str | None, timeout: float = 120.0):
        anthropic = require("anthropic", "the autopilot's fix loop with Claude")
        self.model, self.base_url = model, base_url
        self._client = anthropic.Anthropic(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=2)

    def complete(self, system: str, prompt: str) -> str:
        reply = self._client.messages.create(model=self.model, max_tokens=4096, system=system,
                                             messages=[{"role": "user", "content": prompt}])
        return "".join(getattr(block, "text", "") for block in reply.content)

    def describe(self) -> str:
        host = _host(self.base_url) if self.base_url else "api.anthropic.com"
        return f"anthropic:{self.model} @ {host}"


def _host(url: str) -> str:
    """host[:port] of a base URL, never the user:password@ a URL may carry (a secret)."""
    parsed = urlparse(url)
    try:
        port = parsed.port
    except ValueError:
        port = None
    return f"{parsed.hostname or '?'}{f':{port}' if port else ''}"


def llm_from_env(env: Mapping[str, str] | None = None) -> FixLLM | None:
    """The configured fix LLM, or None when no provider is configured."""
    env = {k: v.strip() for k, v in (os.environ if env is None else env).items() if v.strip()}  # blank = unset
    provider = (env.get("VIBE_RL_FIX_PROVIDER") or "").strip().lower()
    if not provider:
        if env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL"):
            provider = "openai"
        elif env.get("ANTHROPIC_API_KEY"):
            provider = "anthropic"
        else:
            return None
    model = env.get("VIBE_RL_FIX_MODEL") or DEFAULT_MODEL.get(provider, "")
    if provider == "openai":
        return OpenAIFixLLM(model, env.get("OPENAI_BASE_URL") or None, env.get("OPENAI_API_KEY"))
    if provider == "anthropic":
        return AnthropicFixLLM(model, env.get("ANTHROPIC_BASE_URL") or None, env.get("ANTHROPIC_API_KEY"))
    raise ConfigError(f"VIBE_RL_FIX_PROVIDER={provider!r} is not supported: use 'openai' or 'anthropic'")
