"""TaskSpec planning with the official OpenAI SDK (structured output: response_format json_schema,
a TaskSpec with a quote of the spec for each value).

Env: OPENAI_API_KEY, optional OPENAI_BASE_URL (any OpenAI-compatible server), VIBE_RL_PLANNER_MODEL."""

from __future__ import annotations

import os
from typing import Any

from vibe_rl.errors import PlannerError
from vibe_rl.planner.llm import LLMPlanner, schema, system_prompt


class OpenAIPlanner(LLMPlanner):
    name = "openai"

    def __init__(self, model: str | None = None, max_attempts: int = 3, **client_kwargs: Any):
        super().__init__(model or os.environ.get("VIBE_RL_PLANNER_MODEL", "gpt-4o"), max_attempts, **client_kwargs)
        import openai

        if not (client_kwargs.get("api_key") or os.environ.get("OPENAI_API_KEY")):
            raise PlannerError("The openai planner needs OPENAI_API_KEY (and OPENAI_BASE_URL for a compatible "
                               "server). Set it, or use --planner offline.")
        self.client = openai.OpenAI(**client_kwargs)
        self.system = system_prompt()

    def _ask(self, messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        reply = self.client.chat.completions.create(
            model=self.model,
            messages=[{"role": "system", "content": self.system}, *messages],
            response_format={"type": "json_schema", "json_schema": {"name": "QuotedTaskSpec", "schema": schema()}},
        )
        content = reply.choices[0].message.content or ""
        return content, [{"role": "assistant", "content": content}]
