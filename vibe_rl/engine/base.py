"""The engine contract: generate from prompt token ids, train on samples, save/load.

Light module: importing it must not import torch. Implementations live in
sibling modules and are chosen by name in `vibe_rl.engine.load_engine`.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from vibe_rl.rl.samples import Sample


MAX_TOP_LOGPROBS = 20  # as in the OpenAI API

TokenCallback = Callable[[int, float], None]
"""`on_token(token_id, logprob)`: called once per generated token, in order, from the engine's
decode thread, before the request's future resolves (so a consumer has seen every token
when the Generation arrives). It must be quick and must not block; an asyncio server hops to
its event loop with `loop.call_soon_threadsafe(...)`, never touching loop objects directly.
An exception it raises is logged and the callback is dropped for that request; generation
goes on."""


@dataclass
class SamplingParams:
    """How to sample one completion.

    temperature 0 means greedy decoding (logprobs are then those of the
    untempered distribution). `stop` strings end generation as soon as the
    decoded response contains one; the stop string itself is kept in the
    returned tokens (the engine never re-tokenizes). `seed` makes one request
    reproducible when it runs alone; None draws from the engine's generator.
    `top_logprobs` > 0 asks for that many most likely tokens (with their
    logprobs under the same sampling distribution) at every generated position,
    returned in `Generation.top_logprobs`; tokens outside the top-p nucleus
    (logprob -inf) are left out, so a position may list fewer.
    """

    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 512
    stop: list[str] = field(default_factory=list)
    seed: int | None = None
    top_logprobs: int = 0

    def __post_init__(self) -> None:
        from vibe_rl.errors import ConfigError

        if self.temperature < 0:
            raise ConfigError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_tokens < 1:
            raise ConfigError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if not 0 <= self.top_logprobs <= MAX_TOP_LOGPROBS:
            raise ConfigError(f"top_logprobs must be in [0, {MAX_TOP_LOGPROBS}], got {self.top_logprobs}")
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        self.stop = [s for s in (self.stop or []) if s]


FinishReason = Literal["stop", "length"]


@dataclass
class Generation:
    """One completion: the sampled ids and the logprob of each under the distribution used.

    `top_logprobs[i]` lists (token_id, logprob) pairs, most likely first, for generated
    position i when `SamplingParams.top_logprobs` > 0; empty otherwise.
    """

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: FinishReason = "stop"
    weight_version: int = 0
    prompt_len: int = 0
    top_logprobs: list[list[tuple[int, float]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if len(self.token_ids) != len(self.logprobs):
            raise ValueError(f"{len(self.token_ids)} token ids but {len(self.logprobs)} logprobs")


@runtime_checkable
class Engine(Protocol):
    """What the swarm server needs from a model backend."""

    tokenizer: Any
    version: int
    max_model_len: int

    def submit(self, prompt_ids: list[int], sampling: SamplingParams,
               on_token: TokenCallback | None = None) -> Future[Generation]:
        """Queue one request; thread-safe. Requests queued together run as one batch.

        `on_token` (optional, see TokenCallback) streams each token as it is sampled.
        """
        ...

    def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> Generation:
        """Blocking `submit(...).result()`."""
        ...

    def train(self, samples: list[Sample]) -> dict[str, float]:
        """One optimiser step on the samples; version += 1. Returns metrics."""
        ...

    def save(self, directory: str | Path) -> Path:
        """Write weights (HF dir or LoRA adapter), optimizer state and step."""
        ...

    def load(self, directory: str | Path) -> None:
        """Restore what `save` wrote."""
        ...

    def close(self) -> None:
        """Stop the worker thread and free memory."""
        ...
