"""One `/v1/chat/completions` call on a local engine: render, generate, answer.

The response is an OpenAI chat completion (a dict, or an SSE stream of chunks
when `stream: true`). Each choice also becomes a `TurnRecord` with the prompt
ids, the engine's response ids and logprobs, and the weight version.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from vibe_rl.schema import RolloutConfig
from vibe_rl.swarm.chat import PrefixCache, parse_tool_calls, render_text, trim_stop
from vibe_rl.swarm.pool import TurnRecord
from vibe_rl.swarm.protocol import ApiError, ChatCompletionRequest


@dataclass
class ChatResult:
    body: Any  # dict, or an async iterator of SSE bytes
    turns: list[TurnRecord]


def sampling_for(req: ChatCompletionRequest, rollout: RolloutConfig, room: int):
    """rollout.max_tokens is both the default and the upper bound of a call's max_tokens."""
    from vibe_rl.engine.base import SamplingParams

    asked = req.max_completion_tokens or req.max_tokens or rollout.max_tokens
    return SamplingParams(
        temperature=rollout.temperature if req.temperature is None else req.temperature,
        top_p=rollout.top_p if req.top_p is None else req.top_p,
        max_tokens=max(1, min(asked, rollout.max_tokens, room)),
        stop=req.stop_list(), seed=req.seed)


async def generate_on(engine: Any, req: ChatCompletionRequest, rollout: RolloutConfig, model_name: str,
                      timing: dict[str, Any], static: bool = False, enter=None, exit_=None,
                      prefixes: PrefixCache | None = None) -> ChatResult:
    messages = [m.model_dump(exclude_none=True) for m in req.messages]
    prompt_text, prompt_ids = await asyncio.to_thread(_tokenize, engine, messages, req, prefixes)  # off the loop
    room = engine.max_model_len - len(prompt_ids)
    if room < 1:
        raise ApiError(400, f"This model's maximum context length is {engine.max_model_len} tokens, but the "
                            f"prompt has {len(prompt_ids)} tokens. Shorten the messages (e.g. keep only recent "
                            "turns) or raise model.max_model_len.", code="context_length_exceeded", param="messages")
    sampling = sampling_for(req, rollout, room)
    t_submit = time.perf_counter()
    done_at: list[float] = []
    if enter:
        enter()
    try:
        futures = []
        for i in range(req.n):
            s = sampling if (req.n == 1 or sampling.seed is None) else type(sampling)(
                **{**sampling.__dict__, "seed": (sampling.seed + i + 2**63) % 2**64 - 2**63})  # stays an int64
            fut = engine.submit(prompt_ids, s)
            fut.add_done_callback(lambda _f: done_at.append(time.perf_counter()))
            futures.append(asyncio.wrap_future(fut))
        try:
            gens = [await futures[0]] if len(futures) == 1 else await asyncio.gather(*futures)
        except ValueError as exc:  # SequenceTooLongError and bad sampling are ValueErrors
            raise ApiError(400, str(exc), code="invalid_request") from exc
    finally:
        if exit_:
            exit_()
    timing["engine_s"] = timing.get("engine_s", 0.0) + (max(done_at) if done_at else time.perf_counter()) - t_submit

    tools_on = bool(req.tools) and req.tool_choice != "none"
    stop = req.stop_list()
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
            choice["logprobs"] = {"content": [
                {"token": tok, "logprob": lp, "bytes": list(tok.encode("utf-8")), "top_logprobs": []}
                for tok, lp in zip(engine.tokenizer.convert_ids_to_tokens(gen.token_ids), gen.logprobs, strict=True)]}
        choices.append(choice)
        completion_tokens += len(gen.token_ids)
        turns.append(TurnRecord(prompt_ids=prompt_ids, response_ids=list(gen.token_ids),
                                logprobs=list(gen.logprobs), messages=messages, response_text=text,
                                model=req.model, static=static, temperature=sampling.temperature,
                                top_p=sampling.top_p,
                                weight_version=getattr(gen, "weight_version", getattr(engine, "version", 0))))
    body = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
            "model": model_name, "choices": choices, "system_fingerprint": f"v{getattr(engine, 'version', 0)}",
            "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": completion_tokens,
                      "total_tokens": len(prompt_ids) + completion_tokens}}
    if req.stream:
        return ChatResult(sse_chunks(body, bool(req.stream_options and req.stream_options.include_usage)), turns)
    return ChatResult(body, turns)


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


async def run(serving: Any, req: ChatCompletionRequest, timing: dict[str, Any],
              prefixes: PrefixCache | None = None) -> ChatResult:
    return await generate_on(serving.engine, req, serving.job.rollout, serving.model_name, timing,
                             enter=serving.engine_enter, exit_=serving.engine_exit, prefixes=prefixes)


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
