"""`POST /v1/completions` (legacy text completions) on the trainable model of an episode.

A prompt is text (rendered as-is, no chat template; an episode's earlier calls are reused as token
prefixes, like chat turns) or token ids (used verbatim), or a list of either. Choices are numbered
prompt * n + j. Every choice is recorded as a trainable turn of the episode, like a chat call.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from vibe_rl.rl.samples import Turn
from vibe_rl.swarm.protocol import CompletionRequest
from vibe_rl.swarm.server.chat import PrefixCache, trim_stop
from vibe_rl.swarm.server.errors import ApiError
from vibe_rl.swarm.server.generate import ChatResult, sampling_for, submit
from vibe_rl.swarm.server.openai_compat import cap_fields, check_completion
from vibe_rl.swarm.server.stream import TokenFeed, completion_events


def _prompts(req: CompletionRequest) -> list[str | list[int]]:
    p = req.prompt
    if isinstance(p, str) or (p and isinstance(p[0], int)):
        return [p]
    if not p:
        raise ApiError(400, "prompt is empty; send text or token ids.", code="invalid_request", param="prompt")
    return list(p)


def _check_ids(engine: Any, prompts: list[str | list[int]]) -> None:
    """Token-id prompts must hold ids of the vocabulary (400 naming the first bad one), before anything decodes them."""
    vocab = getattr(engine, "vocab_size", None) or len(engine.tokenizer)
    for i, p in enumerate(prompts):
        bad = next((t for t in p if not 0 <= t < vocab), None) if isinstance(p, list) else None
        if bad is not None:
            raise ApiError(400, f"prompt[{i}] holds the token id {str(bad)[:24]}, outside this model's vocabulary (ids 0 to "
                                f"{vocab - 1}). Send ids from the model's own tokenizer, or send text.",
                           code="invalid_token_id", param="prompt")


def _encode(engine: Any, prompts: list[str | list[int]], prefixes: PrefixCache) -> list[tuple[str, list[int]]]:
    out = []
    for p in prompts:
        if isinstance(p, str):
            out.append((p, prefixes.encode(engine.tokenizer, p)))
        else:
            out.append((engine.tokenizer.decode(p, skip_special_tokens=False), [int(t) for t in p]))
    return out


def _logprobs(tokenizer: Any, gen: Any) -> dict[str, Any]:
    tokens = tokenizer.convert_ids_to_tokens(gen.token_ids)
    tops = gen.top_logprobs or [[] for _ in gen.token_ids]
    return {"tokens": tokens, "token_logprobs": list(gen.logprobs),
            "top_logprobs": [{tokenizer.convert_ids_to_tokens(a): lp for a, lp in top} for top in tops],
            "text_offset": []}


async def complete(serving: Any, req: CompletionRequest, api_key: str | None, player_header: str | None,
                   timing: dict[str, Any]) -> Any:
    ep = serving.registry.for_key(api_key)
    if serving.job is None:
        raise serving._not_ready("completions")
    if req.model not in (serving.model_name, serving.model_name.rstrip("/").rsplit("/", 1)[-1]):
        raise ApiError(404, f"/v1/completions serves the trainable model '{serving.model_name}' only, not "
                            f"'{req.model}'. Use chat completions for static models.", code="model_not_found",
                       param="model")
    ignored = check_completion(req)
    result = None
    ep.last_activity = time.monotonic()
    ep.inflight += 1
    try:
        await serving.wait_rolling()
        result = await _run(serving, req, timing, ep.prefixes, ignored)
    finally:
        if result is None or result.finished is None:
            serving.record_call(ep, req.model, req.user or player_header, False, result.turns if result else None)
    if result.finished is not None:
        result.finished.add_done_callback(
            lambda _f: serving.record_call(ep, req.model, req.user or player_header, False, result.turns))
    return result.body


async def _run(serving: Any, req: CompletionRequest, timing: dict[str, Any], prefixes: PrefixCache,
               ignored: list[str]) -> ChatResult:
    engine, rollout = serving.engine, serving.job.rollout
    raw = _prompts(req)
    cap = serving.config.max_choices
    if len(raw) * req.n > cap:
        raise ApiError(400, f"{len(raw)} prompts x n={req.n} ask for {len(raw) * req.n} completions in one call; at "
                            f"most {cap} are served (ServerConfig.max_choices). Split the prompts over several "
                            "calls.", code="too_many_choices", param="prompt")
    _check_ids(engine, raw)
    prompts = await asyncio.to_thread(_encode, engine, raw, prefixes)
    longest = max(len(ids) for _, ids in prompts)
    if longest >= engine.max_model_len or not all(ids for _, ids in prompts):
        raise ApiError(400, f"Every prompt needs 1 to {engine.max_model_len - 1} tokens (model.max_model_len is "
                            f"{engine.max_model_len}); the longest has {longest}.", code="context_length_exceeded",
                       param="prompt")
    sampling = sampling_for(req, rollout, engine.max_model_len - longest)
    feed = TokenFeed() if req.stream else None
    gens_of = submit(serving.sampler, [ids for _, ids in prompts], sampling, req.n, timing, feed)  # submitted now
    stop = req.stop_list()
    created, cid = int(time.time()), f"cmpl-{uuid.uuid4().hex}"

    async def finish() -> dict[str, Any]:
        gens = await gens_of
        choices, used = [], 0
        for k, gen in enumerate(gens):
            text_prompt, ids = prompts[k // req.n]
            prefixes.add(text_prompt, gen.token_ids, ids + list(gen.token_ids))
            text = trim_stop(engine.tokenizer.decode(gen.token_ids, skip_special_tokens=True), stop)
            choices.append({"index": k, "text": text, "finish_reason": gen.finish_reason,
                            "logprobs": _logprobs(engine.tokenizer, gen) if req.logprobs is not None else None})
            used += len(gen.token_ids)
            result.turns.append(Turn(prompt_ids=ids, response_ids=list(gen.token_ids), response_logprobs=list(gen.logprobs),
                                           messages=[], response_text=text, model=req.model,
                                           context_only=req.context_only,
                                           temperature=sampling.temperature, top_p=sampling.top_p,
                                           weight_version=gen.weight_version))
        prompt_tokens = sum(len(ids) for _, ids in prompts)
        body = {"id": cid, "object": "text_completion", "created": created, "model": serving.model_name,
                "choices": choices, "system_fingerprint": f"v{engine.version}",
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": used,
                          "total_tokens": prompt_tokens + used, **cap_fields(req.max_tokens, rollout.max_tokens)}}
        if ignored:
            body["vibe_ignored_fields"] = ignored
        return body

    result = ChatResult(None, [])
    if feed is None:
        result.body = await finish()
        return result
    base = {"id": cid, "object": "text_completion", "created": created, "model": serving.model_name}
    result.finished = asyncio.ensure_future(finish())
    result.body = completion_events(feed, result.finished, engine.tokenizer, base, len(prompts) * req.n, stop,
                                    bool(req.stream_options and req.stream_options.include_usage))
    return result
