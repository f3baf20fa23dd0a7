"""Tools for every chat template: find out what a template renders, write the rest into the messages.

Many chat templates (SmolLM2's, Llama 2's, most base models') ignore `tools`, drop an assistant
message's `tool_calls` or fail on `tool` messages, silently. `TemplateSupport` finds out once per
tokenizer by rendering probe conversations with and without each feature and looking for a marker;
what the template cannot render is written into the messages themselves, in one documented format
(Hermes style, as Qwen2.5's template renders it), before the template runs:

- tools: a block appended to the system message (a system message is added when there is none): the
  tool schemas as JSON, one a line, inside `<tools></tools>`, and the instruction to answer a call as
  `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`;
- an assistant message's tool_calls: appended to its content, one `<tool_call>` block per call;
- a `tool` message: a `user` message whose content is `<tool_response>...</tool_response>`.

The swarm server renders every prompt this way (`vibe_rl.swarm.server.chat`) and SFT renders its examples the same
way (`vibe_rl.rl.sft`), so a model is trained on exactly the format it is later prompted with.
"""

from __future__ import annotations

import json
from typing import Any

PROBE = "vibe_rl_probe_7f3a"  # a name no real conversation contains
TOOLS_INTRO = ("# Tools\n\nYou can call the functions below. Their JSON schemas are inside <tools></tools>:\n"
               "<tools>\n{schemas}\n</tools>\n\nTo call one, answer with a JSON object holding its name and "
               "arguments inside <tool_call></tool_call> tags, for example:\n"
               '<tool_call>\n{{"name": "{example}", "arguments": {{}}}}\n</tool_call>')


class TemplateSupport:
    """What a tokenizer's chat template renders by itself: `tools`, assistant `tool_calls`, `tool` messages.

    Each is probed once, by rendering a conversation with and without the feature and looking for a
    marker name in the text; a template that raises counts as not rendering it."""

    def __init__(self, tokenizer: Any):
        user = {"role": "user", "content": "hi"}
        tool = {"type": "function", "function": {"name": PROBE, "description": "probe", "parameters":
                                                 {"type": "object", "properties": {}}}}
        call = {"type": "function", "id": "call_0", "function": {"name": PROBE, "arguments": {}}}
        self.tools = self._shows(tokenizer, [user], [tool])
        self.tool_calls = self._shows(tokenizer, [user, {"role": "assistant", "content": "", "tool_calls": [call]}])
        self.tool_messages = self._shows(tokenizer, [user, {"role": "assistant", "content": "", "tool_calls": [call]},
                                                     {"role": "tool", "tool_call_id": "call_0", "content": PROBE}])

    @staticmethod
    def _shows(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> bool:
        try:
            return PROBE in tokenizer.apply_chat_template(messages, tools=tools, tokenize=False,
                                                          add_generation_prompt=True)
        except Exception:  # jinja errors, templates that refuse a role
            return False

    @property
    def complete(self) -> bool:
        return self.tools and self.tool_calls and self.tool_messages

    def describe(self) -> dict[str, str]:
        """For `status`: how each feature reaches the model ('template' or 'prompt', the documented format)."""
        return {k: "template" if getattr(self, k) else "prompt" for k in ("tools", "tool_calls", "tool_messages")}

    def note(self) -> str | None:
        """One line for the server log, or None when the template renders everything."""
        if self.complete:
            return None
        missing = [k.replace("_", " ") for k in ("tools", "tool_calls", "tool_messages") if not getattr(self, k)]
        return (f"the model's chat template does not render {', '.join(missing)}: the server writes them into the "
                "messages in Hermes format (tool schemas in the system message, <tool_call> blocks, "
                "<tool_response> user messages) and parses <tool_call> answers back into tool_calls "
                "(docs/openai-compat.md, 'Tools and chat templates')")


_SUPPORT: dict[int, tuple[Any, TemplateSupport]] = {}


def template_support(tokenizer: Any) -> TemplateSupport:
    """The tokenizer's `TemplateSupport`, probed on first use and kept."""
    key = id(tokenizer)
    hit = _SUPPORT.get(key)
    if hit is None or hit[0] is not tokenizer:
        hit = (tokenizer, TemplateSupport(tokenizer))
        _SUPPORT[key] = hit
    return hit[1]


def _call_block(call: dict[str, Any]) -> str:
    fn = call.get("function") or {}
    args = fn.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            pass
    return "<tool_call>\n" + json.dumps({"name": fn.get("name"), "arguments": args}, ensure_ascii=False) + "\n</tool_call>"


def inline_tools(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                 support: TemplateSupport) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """Template messages (+ tools) with what the template cannot render written into the messages
    (the format in the module docstring); the tools to hand the template (None when inlined)."""
    out = []
    for m in messages:
        if m.get("tool_calls") and not support.tool_calls:
            text = m.get("content") or ""
            blocks = "\n".join(_call_block(c) for c in m["tool_calls"])
            m = {"role": m["role"], "content": f"{text}\n{blocks}" if text else blocks}
        elif m["role"] == "tool" and not support.tool_messages:
            m = {"role": "user", "content": f"<tool_response>\n{m.get('content') or ''}\n</tool_response>"}
        out.append(m)
    if not tools or support.tools:
        return out, tools or None
    schemas = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
    example = ((tools[0].get("function") or {}).get("name") or "name") if isinstance(tools[0], dict) else "name"
    block = TOOLS_INTRO.format(schemas=schemas, example=example)
    if out and out[0]["role"] == "system":
        out[0] = {**out[0], "content": f"{out[0]['content']}\n\n{block}" if out[0]["content"] else block}
    else:
        out.insert(0, {"role": "system", "content": block})
    return out, None
