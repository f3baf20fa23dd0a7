"""The generation side of the vLLM engine (a mixin of `VLLMEngine`): one worker thread drives vLLM's
`LLMEngine` step by step.

`submit` queues token ids; between steps the worker adds every queued request (continuous batching),
streams each new token to its `on_token` and resolves a request's future when it finishes. A queued
call (`_call`: a weight sync) stops admission: the requests already running finish, the call runs on
the worker thread (the only thread that touches vLLM), then the requests queued behind it start; so
each Generation comes from one weight version, the one it carries. A failed vLLM step fails the
requests it was running, not the engine.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from vibe_rl.engine import vllm_setup as vs
from vibe_rl.engine.base import Generation, SamplingParams, TokenCallback
from vibe_rl.engine.generate import Request, checked_prompt
from vibe_rl.errors import EngineError

log = logging.getLogger(__name__)


@dataclass
class _Live:
    req: Request
    version: int
    ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    top: list[list[tuple[int, float]]] = field(default_factory=list)


@dataclass
class _Call:
    fn: Callable[[], Any]
    future: Future = field(default_factory=Future)


class VLLMGeneration:
    """Mixin: expects `llm`, `version`, `max_model_len`, `vocab_size`, `eos_ids`, `stats`, `_rng`, `_down`."""

    llm: Any
    version: int
    max_model_len: int
    vocab_size: int
    eos_ids: set[int]
    stats: dict[str, int]
    _down: str | None

    def _start_worker(self) -> None:
        self._queue: queue.Queue[Request | _Call | None] = queue.Queue()
        self._closed = False
        self._next_id = 0
        self._worker = threading.Thread(target=self._serve, name="vibe-rl-vllm", daemon=True)
        self._worker.start()

    def _stop_worker(self) -> None:
        self._closed = True
        self._queue.put(None)
        self._worker.join(timeout=60)
        while not self._queue.empty():  # a request that slipped in while closing: fail it, never hang
            item = self._queue.get_nowait()
            if isinstance(item, Request) and item.future.set_running_or_notify_cancel():
                item.future.set_exception(EngineError("The engine was closed before this request ran."))
            elif isinstance(item, _Call) and not item.future.done():
                item.future.set_exception(EngineError("The engine was closed before this call ran."))

    def submit(self, prompt_ids: list[int], sampling: SamplingParams | None = None,
               on_token: TokenCallback | None = None) -> Future[Generation]:
        self._check_up()
        sampling = sampling or SamplingParams()
        prompt_ids = checked_prompt(prompt_ids, self.max_model_len, self.vocab_size)
        seed = sampling.seed if sampling.seed is not None else self._rng.getrandbits(62)
        request = Request(prompt_ids, sampling, seed, on_token=on_token)
        self._queue.put(request)
        return request.future

    def generate(self, prompt_ids: list[int], sampling: SamplingParams | None = None) -> Generation:
        return self.submit(prompt_ids, sampling).result()

    def _serve(self) -> None:
        backlog: list[Request | _Call] = []
        running: dict[str, _Live] = {}
        while True:
            try:  # block only while idle
                item = self._queue.get() if not (running or backlog) else self._queue.get_nowait()
            except queue.Empty:
                item = False
            while item is not False:
                if item is None:
                    return self._fail_all(running, backlog)
                backlog.append(item)
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    item = False
            while backlog and isinstance(backlog[0], Request):  # a queued call (weight sync) stops admission
                self._admit(backlog.pop(0), running)
            if backlog and not running:
                call = backlog.pop(0)
                try:
                    call.future.set_result(call.fn())
                except BaseException as exc:
                    call.future.set_exception(exc)
                continue
            if running:
                self._step(running)

    def _admit(self, req: Request, running: dict[str, _Live]) -> None:
        if not req.future.set_running_or_notify_cancel():
            return
        if self._down:
            req.future.set_exception(EngineError(self._down))
            return
        budget = min(req.sampling.max_tokens, self.max_model_len - len(req.prompt_ids))
        rid = str(self._next_id)
        self._next_id += 1
        try:
            self.llm.add_request(rid, {"prompt_token_ids": req.prompt_ids},
                                 vs.vllm_sampling(req.sampling, req.seed, budget, self.eos_ids))
        except Exception as exc:
            req.future.set_exception(exc)
            return
        running[rid] = _Live(req, self.version)
        self.stats["largest_batch"] = max(self.stats["largest_batch"], len(running))

    def _step(self, running: dict[str, _Live]) -> None:
        try:
            outputs = self.llm.step()
        except Exception as exc:
            log.exception("vLLM step failed; failing its %d running request(s)", len(running))
            self._fail_all(running, [], exc)
            return
        for out in outputs:
            live = running.get(out.request_id)
            if live is None:
                continue
            done = out.outputs[0]
            ids = list(done.token_ids)
            for i, (token, logprob) in enumerate(zip(ids, vs.sampled_logprobs(done.logprobs or [], ids), strict=True)):
                live.ids.append(token)
                live.logprobs.append(logprob)
                if live.req.sampling.top_logprobs:
                    live.top.append(vs.top_entries(done.logprobs[i], live.req.sampling.top_logprobs))
                if live.req.on_token is not None:
                    try:
                        live.req.on_token(token, logprob)
                    except Exception:
                        log.exception("on_token callback failed; no more tokens are streamed to it")
                        live.req.on_token = None
            if out.finished:
                del running[out.request_id]
                reason = "stop" if done.finish_reason == "stop" else "length"
                self.stats["requests"] += 1
                self.stats["generated_tokens"] += len(live.ids)
                self.stats["prompt_tokens"] += len(live.req.prompt_ids)
                self.stats["prefix_hit_tokens"] += int(getattr(out, "num_cached_tokens", 0) or 0)
                live.req.future.set_result(Generation(live.ids, live.logprobs, reason, live.version,
                                                      len(live.req.prompt_ids), live.top))

    def _fail_all(self, running: dict[str, _Live], backlog: list, exc: BaseException | None = None) -> None:
        error = exc or EngineError("The engine was closed before this request finished.")
        if running:
            try:
                self.llm.abort_request(list(running))
            except Exception:
                log.exception("could not abort the failed requests in vLLM")
        for live in running.values():
            if not live.req.future.done():
                live.req.future.set_exception(error)
        running.clear()
        for item in backlog:
            if isinstance(item, Request) and item.future.set_running_or_notify_cancel():
                item.future.set_exception(error)
            elif isinstance(item, _Call) and not item.future.done():
                item.future.set_exception(error)
        backlog.clear()

    def _call(self, fn: Callable[[], Any]) -> Any:
        """Run `fn` on the worker thread once no request is running; requests queued after it wait."""
        self._check_up()
        call = _Call(fn)
        self._queue.put(call)
        return call.future.result()

    def _check_up(self) -> None:
        if self._closed:
            raise EngineError("The engine is closed; build a new one with load_engine(...).")
        if self._down:
            raise EngineError(self._down)

