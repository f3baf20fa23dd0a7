"""Keeping episodes in flight: `run_in_flight(fn, items, max_in_flight)` calls `fn(item)` over a lazy (maybe endless)
stream of items on a thread pool, retrying failures with back-off; `play_groups` (groups.py) runs on it."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from vibe_rl.errors import ConfigError

log = logging.getLogger("vibe_rl.swarm.client")


@dataclass
class InFlightReport:
    succeeded: int = 0
    failed: int = 0
    retried: int = 0
    failures: list[tuple[Any, BaseException]] = field(default_factory=list)  # the first 100


def _after(delay: float, fn: Callable[[Any], Any], item: Any) -> Any:
    time.sleep(delay)
    return fn(item)


def run_in_flight(fn: Callable[[Any], Any], items: Iterable[Any], max_in_flight: int, max_retries: int = 2,
                  backoff: float = 1.0) -> InFlightReport:
    """Keep up to `max_in_flight` calls of `fn(item)` running over `items` (which may be
    infinite: it is read lazily). A failing item is retried up to `max_retries` times
    with exponential back-off; an item that still fails is logged and counted, and the
    loop goes on. Returns the counts when `items` is exhausted."""
    if max_in_flight < 1:
        raise ConfigError(f"run_in_flight: max_in_flight must be >= 1, got {max_in_flight} (e.g. "
                          "job.train.batch_size * job.train.grpo_n).")
    report = InFlightReport()
    source = iter(items)
    pending: dict[Future, tuple[Any, int]] = {}
    exhausted = False
    with ThreadPoolExecutor(max_workers=max_in_flight, thread_name_prefix="episode") as pool:
        try:
            while True:
                while not exhausted and len(pending) < max_in_flight:
                    try:
                        item = next(source)
                    except StopIteration:
                        exhausted = True
                        break
                    pending[pool.submit(fn, item)] = (item, 0)
                if not pending:
                    return report
                done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
                for fut in done:
                    item, attempt = pending.pop(fut)
                    exc = fut.exception()
                    if exc is None:
                        report.succeeded += 1
                    elif not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit: stop everything
                        raise exc
                    elif attempt < max_retries:
                        report.retried += 1
                        log.warning("item failed (%s: %s); retry %d/%d", type(exc).__name__, exc, attempt + 1,
                                    max_retries)
                        pending[pool.submit(_after, backoff * 2 ** attempt, fn, item)] = (item, attempt + 1)
                    else:
                        report.failed += 1
                        if len(report.failures) < 100:
                            report.failures.append((item, exc))
                        log.error("item failed after %d attempts: %s: %s", attempt + 1, type(exc).__name__, exc,
                                  exc_info=exc)
        except BaseException:
            for fut in pending:
                fut.cancel()
            raise
