"""Chat template rendering (with tools) and tool-call parsing.

Prompts are rendered with the model's own chat template; responses come back
from the engine as token ids, are decoded once for the wire, and any
`<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks (Qwen2.5 /
Hermes format) become OpenAI `tool_calls`. The recorded training tokens are
always the engine's ids, never a re-tokenisation of this text.

Tools reach every model: what a chat template cannot render (SmolLM2's ignores `tools` and drops
`tool_calls`) is first written into the messages in Hermes format (`vibe_rl.rl.tool_format`), and answers
are parsed back into `tool_calls` by the same `parse_tool_calls` either way.
"""

from __future__ import annotations

import json
import re
import secrets
from typing import Any

from vibe_rl.rl.tool_format import inline_tools, template_support

TOOL_CALL_RE = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


def to_template_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI messages -> what HF chat templates expect: text content, tool-call
    arguments as objects (Qwen's template JSON-encodes them itself)."""
    out = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            content = "".join(str(p.get("text", "")) for p in content if p.get("type", "text") == "text")
        msg: dict[str, Any] = {"role": "system" if m["role"] == "developer" else m["role"], "content": content or ""}
        if m.get("tool_calls"):
            calls = []
            for call in m["tool_calls"]:
                fn = dict(call.get("function") or call)
                args = fn.get("arguments")
                if isinstance(args, str):
                    try:
                        fn["arguments"] = json.loads(args) if args.strip() else {}
                    except json.JSONDecodeError:
                        pass  # keep the raw string; the template writes it as-is
                calls.append({"type": "function", "id": call.get("id"), "function": fn})
            msg["tool_calls"] = calls
        if m.get("tool_call_id"):
            msg["tool_call_id"] = m["tool_call_id"]
        if m.get("name"):
            msg["name"] = m["name"]
        out.append(msg)
    return out


def _encode(tokenizer: Any, text: str) -> list[int]:
    backend = getattr(tokenizer, "backend_tokenizer", None)  # the Rust tokenizer: same ids, half the overhead
    if backend is not None:  # encode_batch releases the GIL (encode holds it: a 6 MB prompt froze the server 5 s)
        return backend.encode_batch([text], add_special_tokens=False)[0].ids
    return list(tokenizer.encode(text, add_special_tokens=False))


def render_text(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                tool_choice: Any = None) -> str:
    """The prompt text of `messages` (+ tools) ending in the assistant generation prompt."""
    if tool_choice == "none":
        tools = None
    template_messages = to_template_messages(messages)
    support = template_support(tokenizer)
    if not support.complete:
        template_messages, tools = inline_tools(template_messages, tools, support)
    return tokenizer.apply_chat_template(template_messages, tools=tools or None,
                                         add_generation_prompt=True, tokenize=False)


def render_prompt(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                  tool_choice: Any = None) -> list[int]:
    """Prompt token ids of `messages` (+ tools), tokenised from scratch."""
    return _encode(tokenizer, render_text(tokenizer, messages, tools, tool_choice))


class PrefixCache:
    """An episode's earlier turns as (text, ids): prompt ids plus the engine's own response ids.

    A later prompt whose text continues one of them (the usual multi-turn case: the
    conversation so far, the model's answer, then new messages) reuses those exact ids
    and tokenises only the new text. So the training sequence holds the tokens the model
    really sampled, never a re-tokenisation of its answer, and consecutive turns merge
    into one sample. A prompt that continues none of them is tokenised from scratch.
    """

    def __init__(self, size: int = 64):
        self.size = size
        self.items: list[list[Any]] = []  # [prompt_text, response_ids, ids, text or None (decoded lazily)]

    def add(self, prompt_text: str, response_ids: list[int], ids: list[int]) -> None:
        self.items.append([prompt_text, response_ids, ids, None])
        if len(self.items) > self.size:
            del self.items[0]

    def encode(self, tokenizer: Any, text: str) -> list[int]:
        best_text, best_ids = "", None
        for item in self.items:
            if item[3] is None:  # decoded only when a later call of the episode needs it
                item[3] = item[0] + tokenizer.decode(item[1], skip_special_tokens=False)
            if len(item[3]) > len(best_text) and text.startswith(item[3]):
                best_text, best_ids = item[3], item[2]
        if best_ids is None:
            return _encode(tokenizer, text)
        rest = text[len(best_text):]
        return best_ids + (_encode(tokenizer, rest) if rest else [])


def parse_tool_calls(text: str) -> tuple[str | None, list[dict[str, Any]]]:
    """Split a response into (content, OpenAI tool_calls). Blocks that are not valid
    JSON with a `name` stay in the content, so nothing the model wrote is lost."""
    calls: list[dict[str, Any]] = []

    def take(match: re.Match) -> str:
        try:
            obj = json.loads(match.group(1))
        except json.JSONDecodeError:
            return match.group(0)
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            return match.group(0)
        args = obj.get("arguments", obj.get("parameters", {}))
        calls.append({"id": f"call_{secrets.token_hex(12)}", "type": "function",
                      "function": {"name": obj["name"],
                                   "arguments": args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)}})
        return ""

    content = TOOL_CALL_RE.sub(take, text) if "<tool_call>" in text else text
    if calls:
        content = content.strip() or None
    return content, calls


def trim_stop(text: str, stop: list[str]) -> str:
    """OpenAI leaves the stop string out of the content (the engine keeps it in the ids)."""
    cut = len(text)
    for s in stop:
        i = text.find(s)
        if i != -1:
            cut = min(cut, i)
    return text[:cut]
