"""What the local engines serve of an OpenAI request: every field is served, refused (400), or ignored.

docs/openai-compat.md is the table; this module enforces its "refused" rows, so no request that asks
for something the engine cannot do is answered as if it had been done. Fields of neither list that a
client sends anyway are ignored and named in the response's `vibe_ignored_fields`.
"""

from __future__ import annotations

from typing import Any

from vibe_rl.swarm.protocol import ChatCompletionRequest, CompletionRequest
from vibe_rl.swarm.server.errors import ApiError

# Accepted and deliberately without effect on a local engine (they tune hosted services).
IGNORED = {"store", "metadata", "service_tier", "parallel_tool_calls", "prompt_cache_key", "safety_identifier",
           "reasoning_effort", "verbosity", "prediction", "modalities"}
# Fields this server cannot honour: a request that sets them is refused with the reason.
REFUSED_EXTRA = {
    "functions": "the deprecated `functions` field is not served; pass `tools` instead",
    "function_call": "the deprecated `function_call` field is not served; pass `tools`/`tool_choice` instead",
    "audio": "audio output is not served (text models only)",
    "web_search_options": "web search is not served",
}
NO_CONSTRAINTS = ("this server samples without constrained decoding, and an unconstrained answer would be recorded "
                  "and trained on as if it obeyed the constraint")


def _refuse(param: str, message: str) -> ApiError:
    return ApiError(400, f"{param}: {message}.", code="unsupported_parameter", param=param)


def _common(req: ChatCompletionRequest | CompletionRequest) -> list[str]:
    if req.presence_penalty:
        raise _refuse("presence_penalty", "only 0 is served (penalties would change the sampling distribution "
                                          "that the recorded logprobs describe)")
    if req.frequency_penalty:
        raise _refuse("frequency_penalty", "only 0 is served (penalties would change the sampling distribution "
                                           "that the recorded logprobs describe)")
    if req.logit_bias:
        raise _refuse("logit_bias", "only an empty logit_bias is served (a bias would change the sampling "
                                    "distribution that the recorded logprobs describe)")
    extra = dict(req.model_extra or {})
    for name, why in REFUSED_EXTRA.items():
        if extra.get(name) is not None and extra[name] != []:  # web_search_options={} turns search on
            raise _refuse(name, why)
    if extra.get("modalities") not in (None, ["text"]):
        raise _refuse("modalities", "only ['text'] is served")
    return sorted(k for k in extra if k not in IGNORED and k not in REFUSED_EXTRA)


def _bad(param: str, message: str, code: str = "invalid_request") -> ApiError:
    return ApiError(400, f"{param}: {message}.", code=code, param=param)


def check_tools(tools: list[dict[str, Any]] | None) -> None:
    """Each tool must be OpenAI's function tool; a malformed one would be rendered into the prompt as junk."""
    for i, tool in enumerate(tools or []):
        fn = tool.get("function")
        if tool.get("type", "function") != "function" or not isinstance(fn, dict) \
                or not isinstance(fn.get("name"), str) or not fn["name"] \
                or not isinstance(fn.get("parameters", {}), dict):
            raise _bad(f"tools[{i}]", 'a tool must be {"type": "function", "function": {"name": "<non-empty str>", '
                                      '"description": "<str>", "parameters": {<JSON schema object>}}}; got '
                                      f"{str(tool)[:200]}", code="invalid_tools")


def check_message_shapes(req: ChatCompletionRequest) -> None:
    """Content parts must be text (a text model would silently drop an image, and the recorded answer
    would be trained as if it had seen it); a tool message must answer a call of the assistant message
    just before it (OpenAI's rule), so every recorded tool result belongs to a call."""
    open_ids: set[str] = set()
    for i, m in enumerate(req.messages):
        if m.content is None and not (m.role == "assistant" and m.tool_calls):
            # OpenAI refuses it too; rendered as an empty turn, the answer would be trained on a prompt that
            # lost what the client meant to say
            given = "null" if "content" in m.model_fields_set else "missing"
            needs = "a string or a list of text parts (only an assistant message with tool_calls may omit it)"
            article = "an" if m.role[0] in "aeiou" else "a"
            raise _bad(f"messages[{i}].content", f"{article} {m.role} message needs content, {needs}; got {given}. Send "
                       "\"\" if the turn is really empty")
        if m.content == [] and not (m.role == "assistant" and m.tool_calls):  # OpenAI refuses it too (min length 1)
            raise _bad(f"messages[{i}].content", "an empty list of content parts; send at least one text part "
                       "({'type': 'text', 'text': '...'}), or \"\" if the turn is really empty")
        for k, part in enumerate(m.content if isinstance(m.content, list) else []):
            kind = part.get("type", "text")
            if kind != "text":
                raise _bad(f"messages[{i}].content[{k}]", f"content parts of type {kind!r} are not served: this "
                           "server runs a text-only model. Send text parts ({'type': 'text', 'text': '...'}) or a "
                           "plain string", code="unsupported_content")
            if not isinstance(part.get("text"), str):
                raise _bad(f"messages[{i}].content[{k}].text", "a text part needs a string 'text'")
        if m.role == "tool":
            if not m.tool_call_id:
                raise _bad(f"messages[{i}].tool_call_id", "a tool message needs the tool_call_id of the call it "
                           "answers (the 'id' of one of the preceding assistant message's tool_calls)",
                           code="invalid_tool_message")
            if m.tool_call_id not in open_ids:
                raise _bad(f"messages[{i}]", f"the tool message answers tool_call_id {m.tool_call_id!r}, but the "
                           "messages just before it (an assistant message with tool_calls, then its tool results) "
                           f"hold no call with that id (open calls: {sorted(open_ids) or 'none'}). Put the assistant "
                           "message with that tool call right before its tool results", code="invalid_tool_message")
        elif m.role == "assistant":
            open_ids = {str(c.get("id")) for c in m.tool_calls or [] if c.get("id") is not None}
        else:
            open_ids = set()


def check_chat(req: ChatCompletionRequest) -> list[str]:
    """Raise ApiError(400) for what a local engine cannot serve; return the names of unknown fields."""
    check_tools(req.tools)
    check_message_shapes(req)
    kind = (req.response_format or {}).get("type", "text")
    if kind not in ("text", "json_object", "json_schema"):
        raise _bad("response_format.type", f"unknown type {kind!r}: OpenAI's are 'text', 'json_object' and "
                   "'json_schema', and this server serves 'text' only")
    if kind != "text":
        raise _refuse("response_format", f"type '{kind}' is not supported: {NO_CONSTRAINTS}. Ask for JSON in "
                                         "the prompt and parse it in your client, or use response_format "
                                         "{'type': 'text'}")
    choice = req.tool_choice
    if isinstance(choice, dict) or choice == "required":
        what = "'required'" if choice == "required" else "a named function"
        raise _refuse("tool_choice", f"{what} is not supported: {NO_CONSTRAINTS}. Use 'auto' (the model may "
                                     "answer in text; check message.tool_calls) or 'none'")
    if choice not in (None, "auto", "none"):
        raise _refuse("tool_choice", f"unknown value {choice!r}; use 'auto' or 'none'")
    if req.top_logprobs and not req.logprobs:
        raise _refuse("top_logprobs", "needs logprobs: true")
    return _common(req)


def check_completion(req: CompletionRequest) -> list[str]:
    if req.echo:
        raise _refuse("echo", "only false is served; the prompt is in your hands already")
    if req.suffix:
        raise _refuse("suffix", "fill-in-the-middle is not served")
    if req.best_of not in (None, 1, req.n):
        raise _refuse("best_of", "only best_of equal to n (or 1) is served; rank the n choices yourself")
    return _common(req)


def cap_fields(asked: int | None, cap: int) -> dict[str, Any]:
    """The cap on a call's max_tokens (rollout.max_tokens), stated in every response's usage."""
    return {"max_tokens_cap": cap, "max_tokens_clamped": bool(asked and asked > cap)}
