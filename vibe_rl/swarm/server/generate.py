"""One `/v1/chat/completions` call on a local engine: render, generate, answer.

The response is an OpenAI chat completion (a dict), or with `stream: true` an
SSE stream whose chunks leave as the engine samples the tokens (see
`vibe_rl.swarm.server.stream`; `ChatResult.finished` resolves when generation ends).
Each choice also becomes a `Turn` with the prompt ids, the engine's
response ids and logprobs, and the weight version.

The engine is reached through `Sampler` alone (the trainable engine behind the trainer's gate,
`trainer.GatedEngine`, or a static model's frozen engine); nothing here calls back into its caller.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol

from vibe_rl.rl.samples import Turn
from vibe_rl.schema import RolloutConfig
from vibe_rl.swarm.protocol import ChatCompletionRequest
from vibe_rl.swarm.server.chat import PrefixCache, parse_tool_calls, render_text, trim_stop
from vibe_rl.swarm.server.errors import ApiError
from vibe_rl.swarm.server.openai_compat import cap_fields, check_chat
from vibe_rl.swarm.server.stream import TokenFeed, chat_events


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


@dataclass
class ChatResult:
    body: Any  # dict, or an async iterator of SSE bytes
    turns: list[Turn]
    # Streaming: resolves (to the complete body) once generation ends; `turns` are filled in by then.
    finished: asyncio.Future | None = None


def sampling_for(req: Any, rollout: RolloutConfig, room: int):
    """rollout.max_tokens is both the default and the upper bound of a call's max_tokens (a larger
    request is clamped; usage.max_tokens_cap / max_tokens_clamped say so)."""
    from vibe_rl.engine.base import SamplingParams

    asked = getattr(req, "max_completion_tokens", None) or req.max_tokens or rollout.max_tokens
    top_logprobs = (req.top_logprobs or 0) if isinstance(req, ChatCompletionRequest) else (req.logprobs or 0)
    return SamplingParams(
        temperature=rollout.temperature if req.temperature is None else req.temperature,
        top_p=rollout.top_p if req.top_p is None else req.top_p,
        max_tokens=max(1, min(asked, rollout.max_tokens, room)),
        stop=req.stop_list(), seed=req.seed, top_logprobs=top_logprobs)


async def generate_on(engine: Sampler, req: ChatCompletionRequest, rollout: RolloutConfig, model_name: str,
                      timing: dict[str, Any], static: bool = False,
                      prefixes: PrefixCache | None = None) -> ChatResult:
    ignored = check_chat(req)
    messages = [m.model_dump(exclude_none=True) for m in req.messages]
    if _prompt_chars(req) > INLINE_PROMPT_CHARS:  # a long prompt renders off the loop; a short one costs less inline
        prompt_text, prompt_ids = await asyncio.to_thread(_tokenize, engine, messages, req, prefixes)
    else:
        prompt_text, prompt_ids = _tokenize(engine, messages, req, prefixes)
    room = engine.max_model_len - len(prompt_ids)
    if room < 1:
        raise ApiError(400, f"This model's maximum context length is {engine.max_model_len} tokens, but the "
                            f"prompt has {len(prompt_ids)} tokens. Shorten the messages (e.g. keep only recent "
                            "turns) or raise model.max_model_len.", code="context_length_exceeded", param="messages")
    sampling = sampling_for(req, rollout, room)
    feed = TokenFeed() if req.stream else None
    # submitted now, so a weight update waits for this call even before a stream's generation task runs
    gens_of = submit(engine, [prompt_ids], sampling, req.n, timing, feed)

    async def finish() -> dict[str, Any]:
        gens = await gens_of
        body, turns = _chat_body(engine, req, gens, messages, prompt_text, prompt_ids, sampling, model_name,
                                 static, prefixes)
        body["usage"].update(cap_fields(req.max_completion_tokens or req.max_tokens, rollout.max_tokens))
        if ignored:
            body["vibe_ignored_fields"] = ignored
        result.turns.extend(turns)
        return body

    result = ChatResult(None, [])
    if feed is None:
        result.body = await finish()
        return result
    base = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model_name, "system_fingerprint": f"v{getattr(engine, 'version', 0)}"}
    result.finished = asyncio.ensure_future(finish())
    result.body = chat_events(feed, result.finished, engine.tokenizer, base, req.n, req.stop_list(),
                              _tools_on(req), req.logprobs, req.top_logprobs or 0,
                              bool(req.stream_options and req.stream_options.include_usage))
    return result


def _tools_on(req: ChatCompletionRequest) -> bool:
    return bool(req.tools) and req.tool_choice != "none"


def submit(engine: Sampler, prompts: list[list[int]], sampling: Any, n: int, timing: dict[str, Any],
           feed: TokenFeed | None = None) -> Awaitable[list[Any]]:
    """Submit n completions of every prompt now (choice index = prompt * n + j); the awaitable gathers
    them. With a feed, tokens stream into it."""
    t_submit = time.perf_counter()
    done_at: list[float] = []
    futures = []
    for p, prompt_ids in enumerate(prompts):
        for j in range(n):
            s = sampling if (n == 1 or sampling.seed is None) else type(sampling)(
                **{**sampling.__dict__, "seed": (sampling.seed + j + 2**63) % 2**64 - 2**63})  # stays an int64
            index = p * n + j
            fut = engine.submit(prompt_ids, s, on_token=feed.on_token(index) if feed else None)
            fut.add_done_callback(lambda _f: done_at.append(time.perf_counter()))
            if feed:
                fut.add_done_callback(feed.on_done(index))
            futures.append(asyncio.wrap_future(fut))

    async def gather() -> list[Any]:
        try:
            gens = [await futures[0]] if len(futures) == 1 else await asyncio.gather(*futures)
        except ValueError as exc:  # SequenceTooLongError and bad sampling are ValueErrors
            raise ApiError(400, str(exc), code="invalid_request") from exc
        timing["engine_s"] = (timing.get("engine_s", 0.0) + (max(done_at) if done_at else time.perf_counter())
                              - t_submit)
        return gens

    return gather()


def logprobs_content(tokenizer: Any, gen: Any) -> list[dict[str, Any]]:
    """OpenAI `logprobs.content`: each sampled token, its logprob, and its top alternatives if asked for.

    An id past the tokenizer's vocabulary (models pad their embedding to a multiple of 64 or 128, and a
    sampler can draw a padding row) has no token: it is listed as "" with `bytes` None, never an error."""
    def entry(token_id: int, logprob: float) -> dict[str, Any]:
        token = tokenizer.convert_ids_to_tokens(token_id)
        if token is None:
            return {"token": "", "logprob": logprob, "bytes": None}
        return {"token": token, "logprob": logprob, "bytes": list(token.encode("utf-8"))}

    tops = gen.top_logprobs or [[] for _ in gen.token_ids]
    return [{**entry(t, lp), "top_logprobs": [entry(a, alp) for a, alp in top]}
            for t, lp, top in zip(gen.token_ids, gen.logprobs, tops, strict=True)]


def _chat_body(engine: Any, req: ChatCompletionRequest, gens: list[Any], messages: list[dict[str, Any]],
               prompt_text: str, prompt_ids: list[int], sampling: Any, model_name: str, static: bool,
               prefixes: PrefixCache | None) -> tuple[dict[str, Any], list[Turn]]:
    tools_on, stop = _tools_on(req), req.stop_list()
    choices, turns = [], []
    completion_tokens = 0
    for i, gen in enumerate(gens):
        text = engine.tokenizer.decode(gen.token_ids, skip_special_tokens=True)
        if prefixes is not None:
            prefixes.add(prompt_text, gen.token_ids, prompt_ids + list(gen.token_ids))
        if stop:
            text = trim_stop(text, stop)
        content, calls = parse_tool_calls(text) if tools_on else (text, [])
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
        choice: dict[str, Any] = {"index": i, "message": message, "logprobs": None,
                                  "finish_reason": "tool_calls" if calls else gen.finish_reason}
        if req.logprobs:
            choice["logprobs"] = {"content": logprobs_content(engine.tokenizer, gen)}
        choices.append(choice)
        completion_tokens += len(gen.token_ids)
        turns.append(Turn(prompt_ids=prompt_ids, response_ids=list(gen.token_ids),
                                response_logprobs=list(gen.logprobs), messages=messages, response_text=text,
                                model=req.model, static=static, context_only=req.context_only,
                                temperature=sampling.temperature,
                                top_p=sampling.top_p,
                                weight_version=getattr(gen, "weight_version", getattr(engine, "version", 0))))
    body = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
            "model": model_name, "choices": choices, "system_fingerprint": f"v{getattr(engine, 'version', 0)}",
            "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": completion_tokens,
                      "total_tokens": len(prompt_ids) + completion_tokens}}
    return body, turns


INLINE_PROMPT_CHARS = 16_384  # prompts up to this many characters are rendered on the event loop


def _prompt_chars(req: ChatCompletionRequest) -> int:
    """A cheap estimate of the prompt's size: message texts, tool-call arguments, the tools' JSON (bounded by
    ServerConfig.max_tools_bytes before this runs; issue 25: a per-tool guess let a 4 MB tool render on the loop)."""
    size = len(json.dumps(req.tools, ensure_ascii=False, default=str)) if req.tools else 0
    for m in req.messages:
        if isinstance(m.content, str):
            size += len(m.content)
        elif m.content:
            size += sum(len(str(part.get("text", ""))) + 100 for part in m.content)
        for call in m.tool_calls or []:
            fn = call.get("function")
            size += 200 + (len(str(fn.get("arguments", ""))) + len(str(fn.get("name", ""))) if isinstance(fn, dict)
                           else INLINE_PROMPT_CHARS)
    return size


def _tokenize(engine: Any, messages: list[dict[str, Any]], req: ChatCompletionRequest,
              prefixes: PrefixCache | None) -> tuple[str, list[int]]:
    """Render the chat template and tokenise (in a worker thread: long prompts must not stall the server)."""
    try:
        text = render_text(engine.tokenizer, messages, req.tools, req.tool_choice)
    except Exception as exc:  # malformed tool_calls, content the template cannot take: the request's fault
        raise ApiError(400, f"The messages cannot be rendered with the model's chat template "
                            f"({type(exc).__name__}: {str(exc)[:300]}). Check tool_calls (each needs "
                            "function.name and function.arguments) and message contents.",
                       code="invalid_messages", param="messages") from None
    return text, (prefixes or PrefixCache(0)).encode(engine.tokenizer, text)


def _sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"


async def sse_chunks(body: dict[str, Any], include_usage: bool):
    """The finished completion as OpenAI stream chunks (role, content, tool calls, finish)."""
    base = {"id": body["id"], "object": "chat.completion.chunk", "created": body["created"],
            "model": body["model"], "system_fingerprint": body.get("system_fingerprint")}
    for choice in body["choices"]:
        i, msg = choice["index"], choice["message"]
        yield _sse({**base, "choices": [{"index": i, "delta": {"role": "assistant", "content": ""},
                                         "logprobs": None, "finish_reason": None}]})
        if msg.get("content"):
            yield _sse({**base, "choices": [{"index": i, "delta": {"content": msg["content"]},
                                             "logprobs": choice.get("logprobs"), "finish_reason": None}]})
        for k, call in enumerate(msg.get("tool_calls") or []):
            yield _sse({**base, "choices": [{"index": i, "delta": {"tool_calls": [{"index": k, **call}]},
                                             "logprobs": None, "finish_reason": None}]})
        yield _sse({**base, "choices": [{"index": i, "delta": {}, "logprobs": None,
                                         "finish_reason": choice["finish_reason"]}]})
    if include_usage:
        yield _sse({**base, "choices": [], "usage": body["usage"]})
    yield b"data: [DONE]\n\n"
