"""TaskSpec planning with the official Anthropic SDK (structured output: a forced tool whose input_schema is
the TaskSpec JSON schema). Env: ANTHROPIC_API_KEY, optional ANTHROPIC_BASE_URL, VIBE_RL_PLANNER_MODEL."""

from __future__ import annotations

import json
import os
from typing import Any

from vibe_rl.errors import PlannerError
from vibe_rl.extras import require
from vibe_rl.planner.llm import LLMPlanner, schema, system_prompt

TOOL = "submit_task_spec"


class AnthropicPlanner(LLMPlanner):
    name = "anthropic"

    def __init__(self, model: str | None = None, max_attempts: int = 3, **client_kwargs: Any):
        super().__init__(model or os.environ.get("VIBE_RL_PLANNER_MODEL", "claude-sonnet-4-5"), max_attempts,
                         **client_kwargs)
        anthropic = require("anthropic", "the anthropic planner")
        if not (client_kwargs.get("api_key") or os.environ.get("ANTHROPIC_API_KEY")):
            raise PlannerError("The anthropic planner needs ANTHROPIC_API_KEY. Set it, or use --planner offline.")
        self.client = anthropic.Anthropic(**client_kwargs)
        self.system = system_prompt()

    def _ask(self, messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        reply = self.client.messages.create(
            model=self.model, max_tokens=8192, system=self.system, messages=messages,
            tools=[{"name": TOOL, "description": "Submit the TaskSpec.", "input_schema": schema()}],
            tool_choice={"type": "tool", "name": TOOL},
        )
        blocks = [block.model_dump(exclude_none=True) for block in reply.content]
        for block in reply.content:
            if block.type == "tool_use":
                return json.dumps(block.input), [{"role": "assistant", "content": blocks}]
        text = "".join(getattr(block, "text", "") for block in reply.content)
        return text, [{"role": "assistant", "content": blocks or text}]

    def _retry(self, reply: list[dict[str, Any]], error: str) -> list[dict[str, Any]]:
        blocks = reply[0]["content"] if reply else []
        uses = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
        if not uses:
            return super()._retry(reply, error)
        return [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0]["id"], "is_error": True,
                                              "content": f"Invalid TaskSpec: {error}\nCall the tool again, corrected."}]}]
