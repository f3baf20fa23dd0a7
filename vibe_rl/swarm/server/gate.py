"""What generation sees of the engine, and the gate a weight update closes in front of it.

`Sampler` is the one interface the chat and completion paths (`generate.py`, `completions.py`,
`static.py`) generate through: a tokenizer, a context length, the weight version and `submit`.
A static model's frozen engine is a `Sampler` as it is; the trainable engine is served through
`GatedEngine`, which counts every submitted request until the engine has answered it.

`EngineGate` holds the sync semantics of a weight update (`Trainer.update`):

- `close()` stops new calls from passing `wait_open` (they wait, up to `sync_wait_timeout`,
  then get 429 + Retry-After from the serving class), and `drained()` waits until every request
  already inside the engine has finished on the old weights;
- `reopen()` lets the waiting calls through; the pause is not idle time, so every running
  episode's idle clock starts again at that moment.

All of it runs on the event loop thread; an engine future that completes in the engine's thread
hands its count back through `call_soon_threadsafe`.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import Future
from typing import Any, Callable, Protocol

from vibe_rl.swarm.server.registry import EpisodeRegistry


class Sampler(Protocol):
    """The engine as generation uses it (a subset of `vibe_rl.engine.base.Engine`)."""

    @property
    def tokenizer(self) -> Any: ...

    @property
    def max_model_len(self) -> int: ...

    @property
    def version(self) -> int: ...

    def submit(self, prompt_ids: list[int], sampling: Any,
               on_token: Callable[[int, float], None] | None = None) -> Future: ...


class EngineGate:
    """Open while the engine rolls; closed by a weight update, which first drains the engine."""

    def __init__(self, registry: EpisodeRegistry):
        self.registry = registry  # running episodes: the pause does not count as their idle time
        self.inflight = 0  # requests submitted to the engine and not yet answered
        self._open = asyncio.Event()
        self._drained = asyncio.Event()
        self._drained.set()

    @property
    def is_open(self) -> bool:
        return self._open.is_set()

    def open(self) -> None:
        self._open.set()

    async def wait_open(self, timeout: float) -> None:
        """Wait until the gate opens; asyncio.TimeoutError after `timeout` seconds."""
        await asyncio.wait_for(self._open.wait(), timeout=max(0.0, timeout))

    def close(self) -> None:
        """No call passes `wait_open` until `open` or `reopen` (an update starts, or the engine stops)."""
        self._open.clear()

    async def drained(self) -> None:
        """Every request already inside the engine has finished (on the old weights)."""
        await self._drained.wait()

    def reopen(self) -> None:
        now = time.monotonic()
        for ep in self.registry.running.values():  # the pause is not idle time
            ep.last_activity = max(ep.last_activity, now)
        self._open.set()

    def enter(self) -> None:
        self.inflight += 1
        self._drained.clear()

    def exit(self) -> None:
        self.inflight -= 1
        if self.inflight == 0:
            self._drained.set()


class GatedEngine:
    """The trainable engine as a `Sampler`: each submitted request counts in the gate until answered."""

    def __init__(self, engine: Any, gate: EngineGate):
        self.engine = engine
        self.gate = gate

    @property
    def tokenizer(self) -> Any:
        return self.engine.tokenizer

    @property
    def max_model_len(self) -> int:
        return self.engine.max_model_len

    @property
    def version(self) -> int:
        return getattr(self.engine, "version", 0)

    def submit(self, prompt_ids: list[int], sampling: Any,
               on_token: Callable[[int, float], None] | None = None) -> Future:
        fut = self.engine.submit(prompt_ids, sampling, on_token=on_token)
        loop = asyncio.get_running_loop()
        self.gate.enter()
        fut.add_done_callback(lambda _f: _on_loop(loop, self.gate.exit))
        return fut


def _on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[[], None]) -> None:
    try:
        loop.call_soon_threadsafe(fn)
    except RuntimeError:  # the loop has closed (server exit): nobody waits for the count any more
        pass
