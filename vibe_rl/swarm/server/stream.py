"""Token-by-token server-sent events for chat and text completions.

The engine calls `on_token(token_id, logprob)` from its decode thread; `TokenFeed` hops each call onto
the event loop (`loop.call_soon_threadsafe`) into a queue, and the SSE generators below turn the queue
into OpenAI chunks as the tokens arrive. Text that could still become a stop string or a `<tool_call>`
marker is held back until it is clear; tool calls are sent whole, once the answer is complete, in the
last chunk before the finish reason (with the usage chunk after it when asked for).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

TOOL_MARK = "<tool_call>"


def sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"


class TokenFeed:
    """Per-choice token callbacks for the engine, delivered in order into one asyncio queue."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[tuple[int, int | None, float | None]] = asyncio.Queue()

    def on_token(self, index: int) -> Callable[[int, float], None]:
        def push(token_id: int, logprob: float) -> None:  # engine thread: never touch the queue directly
            self.loop.call_soon_threadsafe(self.queue.put_nowait, (index, token_id, logprob))
        return push

    def on_done(self, index: int) -> Callable[[Any], None]:
        def done(_future: Any) -> None:  # after the last on_token of this choice (the engine's contract)
            self.loop.call_soon_threadsafe(self.queue.put_nowait, (index, None, None))
        return done


class TextStream:
    """The decoded text of a growing list of token ids, handed out as deltas that are safe to send.

    Decoding is incremental (only the ids since the last complete character are decoded again), so a
    long answer costs O(length) on the event loop, not O(length^2).
    """

    def __init__(self, tokenizer: Any, stop: list[str], watch_tools: bool):
        self.tokenizer, self.stop = tokenizer, stop
        self.marks = list(stop) + ([TOOL_MARK] if watch_tools else [])
        self.ids: list[int] = []
        self.text = ""  # everything decoded so far
        self.sent = ""  # the part of `text` already handed out
        self._prefix = self._read = 0  # ids[_prefix:_read] decode to the tail of `text` (context for the next)
        self.closed = False  # a stop string or a tool call began: no more content deltas

    def _decode_new(self) -> str:
        decode = self.tokenizer.decode
        before = decode(self.ids[self._prefix:self._read], skip_special_tokens=True)
        after = decode(self.ids[self._prefix:], skip_special_tokens=True)
        if after.endswith("\ufffd") or len(after) <= len(before):  # mid-character, or nothing visible yet
            return ""
        self._prefix, self._read = self._read, len(self.ids)
        return after[len(before):]

    def push(self, token_id: int) -> str:
        self.ids.append(token_id)
        if self.closed:
            return ""
        self.text += self._decode_new()
        cut = len(self.text)
        for mark in self.marks:
            at = self.text.find(mark, len(self.sent))
            if at != -1:
                cut, self.closed = min(cut, at), True
        if not self.closed:  # hold back a tail that may be the start of a mark
            cut -= max((k for m in self.marks for k in range(1, len(m)) if self.text.endswith(m[:k])), default=0)
        if cut <= len(self.sent):
            return ""
        delta, self.sent = self.text[len(self.sent):cut], self.text[:cut]
        return delta

    def rest(self, final: str | None) -> str:
        """What the final content adds to what was sent (nothing when they disagree)."""
        final = final or ""
        return final[len(self.sent):] if final.startswith(self.sent) else ""


def _logprob_entry(tokenizer: Any, token_id: int, logprob: float) -> dict[str, Any]:
    token = tokenizer.convert_ids_to_tokens(token_id)
    return {"token": token, "logprob": logprob, "bytes": list(token.encode("utf-8")), "top_logprobs": []}


async def chat_events(feed: TokenFeed, finished: Awaitable[dict[str, Any]], tokenizer: Any, base: dict[str, Any],
                      n: int, stop: list[str], tools_on: bool, logprobs: bool, top_logprobs: int,
                      include_usage: bool) -> AsyncIterator[bytes]:
    """`chat.completion.chunk` events as tokens arrive; `finished` resolves to the complete body."""
    streams = [TextStream(tokenizer, stop, tools_on) for _ in range(n)]
    per_token_logprobs = logprobs and not top_logprobs  # with top_logprobs they come whole, in the last chunk

    def chunk(i: int, delta: dict[str, Any], finish: str | None = None, lp: Any = None) -> bytes:
        return sse({**base, "choices": [{"index": i, "delta": delta, "logprobs": lp, "finish_reason": finish}]})

    for i in range(n):
        yield chunk(i, {"role": "assistant", "content": ""})
    open_choices = set(range(n))
    while open_choices:
        i, token_id, logprob = await feed.queue.get()
        if token_id is None:
            open_choices.discard(i)
            continue
        delta = streams[i].push(token_id)
        lp = {"content": [_logprob_entry(tokenizer, token_id, logprob)]} if per_token_logprobs else None
        if delta or lp:
            yield chunk(i, {"content": delta}, lp=lp)
    try:
        body = await finished
    except Exception as exc:  # the SDK raises APIError on an error event
        yield sse({"error": {"message": f"Generation failed: {type(exc).__name__}: {exc}",
                             "type": "server_error", "param": None, "code": "generation_failed"}})
        yield DONE
        return
    for choice in body["choices"]:
        i, message = choice["index"], choice["message"]
        rest = streams[i].rest(message.get("content"))
        if rest:
            yield chunk(i, {"content": rest})
        if message.get("tool_calls"):
            yield chunk(i, {"tool_calls": [{"index": k, **call} for k, call in enumerate(message["tool_calls"])]})
        yield chunk(i, {}, choice["finish_reason"], choice["logprobs"] if logprobs and top_logprobs else None)
    if include_usage:
        yield sse({**base, "choices": [], "usage": body["usage"]})
    yield DONE


async def completion_events(feed: TokenFeed, finished: Awaitable[dict[str, Any]], tokenizer: Any,
                            base: dict[str, Any], n_choices: int, stop: list[str],
                            include_usage: bool) -> AsyncIterator[bytes]:
    """`text_completion` events as tokens arrive (logprobs, when asked for, come in each choice's last chunk)."""
    streams = [TextStream(tokenizer, stop, False) for _ in range(n_choices)]

    def chunk(i: int, text: str, finish: str | None = None, lp: Any = None) -> bytes:
        return sse({**base, "choices": [{"index": i, "text": text, "logprobs": lp, "finish_reason": finish}]})

    open_choices = set(range(n_choices))
    while open_choices:
        i, token_id, _ = await feed.queue.get()
        if token_id is None:
            open_choices.discard(i)
            continue
        delta = streams[i].push(token_id)
        if delta:
            yield chunk(i, delta)
    try:
        body = await finished
    except Exception as exc:
        yield sse({"error": {"message": f"Generation failed: {type(exc).__name__}: {exc}",
                             "type": "server_error", "param": None, "code": "generation_failed"}})
        yield DONE
        return
    for choice in body["choices"]:
        i = choice["index"]
        yield chunk(i, streams[i].rest(choice["text"]), choice["finish_reason"], choice["logprobs"])
    if include_usage:
        yield sse({**base, "choices": [], "usage": body["usage"]})
    yield DONE
