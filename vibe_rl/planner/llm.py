"""Shared loop of the LLM planners: ask for a TaskSpec, validate it (schema, family, renderable), and on a
malformed answer ask again with the validation error, a bounded number of times."""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from typing import Any

from pydantic import ValidationError

from vibe_rl.errors import PlannerError, TemplateError, VibeRLError, field_errors
from vibe_rl.scaffold.families import list_families, load_family
from vibe_rl.scaffold.render import render_files
from vibe_rl.schema.spec import TaskSpec

INSTRUCTIONS = """You turn a researcher's description of an RL training task into a TaskSpec JSON object that
matches the given JSON schema exactly. Pick `family` from the template families below; copy the structure of
the family's example and change only what the description asks for (model path, GPUs, batch size, group size,
which team plays which model, static opponent models with their base_url and api_key_env, reward). Keep
server names, mode names, scripts and roles as in the example; leave out a mode the description excludes.
Never invent a value: write every default you pick into `notes`, and copy into `unparsed` each clause whose
number, path, env var or model name you could not place in the TaskSpec. If the description fits none of the
families, answer {"family": "none", "notes": ["<why>"]} instead of forcing one. Answer with the JSON object only."""


def system_prompt() -> str:
    from vibe_rl.planner.offline import OfflinePlanner

    parts = [INSTRUCTIONS, "", "Template families:"]
    for manifest in list_families():
        if not manifest.keywords:  # chosen only with --family (turn_based)
            continue
        parts.append(f"\n## {manifest.name}\n{manifest.description}\nroles: {manifest.roles}\nparameters: "
                     + json.dumps({k: p.model_dump() for k, p in manifest.parameters.items()}))
        for example in manifest.examples[:1]:
            try:
                spec = OfflinePlanner().plan((manifest.path / example).read_text(encoding="utf-8"))
                parts.append("example TaskSpec:\n" + spec.model_dump_json())
            except (VibeRLError, ValueError, OSError):  # an example the offline rules cannot read is not shown
                continue
    return "\n".join(parts)


def schema() -> dict[str, Any]:
    return TaskSpec.model_json_schema()


def parse(raw: str) -> TaskSpec:
    """Validate one answer; raises ValueError with a message fit to send back to the model."""
    text = re.sub(r"^```(?:json)?\s*|\s*```$", "", raw.strip())
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the answer is not valid JSON ({exc}); reply with one JSON object") from exc
    if isinstance(data, dict) and data.get("family") in ("none", None, ""):
        from vibe_rl.planner.offline import HOW_TO_GO_FURTHER
        from vibe_rl.scaffold.families import supported_text

        why = "; ".join(map(str, data.get("notes") or [])) or "no reason given"
        raise PlannerError(f"The planner found no template family for this spec ({why}). {supported_text()} "
                           f"{HOW_TO_GO_FURTHER}")
    try:
        spec = TaskSpec.model_validate(data)
        render_files(spec, load_family(spec.family))
    except ValidationError as exc:
        raise ValueError(f"the JSON does not match the TaskSpec schema: {field_errors(exc)}") from exc
    except TemplateError as exc:
        raise ValueError(f"the TaskSpec cannot be rendered: {exc}") from exc
    return spec


class LLMPlanner(ABC):
    """Subclasses implement `_start(text)` (first messages) and `_ask(messages)` (-> raw JSON, reply messages)
    and `_retry(reply, error)` (-> messages carrying the error back)."""

    name = "llm"

    def __init__(self, model: str | None = None, max_attempts: int = 3, **client_kwargs: Any):
        self.model = model
        self.max_attempts = max_attempts
        self.client_kwargs = client_kwargs

    def plan(self, text: str) -> TaskSpec:
        if not text.strip():
            raise PlannerError("The spec is empty. Describe the task to train.")
        messages = self._start(text)
        error = ""
        for _ in range(self.max_attempts):
            raw, reply = self._ask(messages)
            try:
                return parse(raw)
            except PlannerError:  # the model says no family fits: retrying will not help
                raise
            except ValueError as exc:
                error = str(exc)
                messages = messages + reply + self._retry(reply, error)
        raise PlannerError(f"The {self.name} planner gave no valid TaskSpec in {self.max_attempts} attempts. "
                           f"Last problem: {error[:1500]}\nTry --planner offline, or make the spec more explicit.")

    def _start(self, text: str) -> list[dict[str, Any]]:
        return [{"role": "user", "content": text}]

    @abstractmethod
    def _ask(self, messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        """Send `messages`; return the raw TaskSpec JSON and the reply turns to append on a retry."""

    def _retry(self, reply: list[dict[str, Any]], error: str) -> list[dict[str, Any]]:
        return [{"role": "user", "content": f"That TaskSpec is invalid: {error}\nReply with the corrected JSON."}]
