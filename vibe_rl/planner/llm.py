"""The LLM planners: ask for a TaskSpec with a quote of the spec for every value it sets (checked by
vibe_rl.planner.quotes), validate it (schema, family, renderable), and on a malformed answer ask again with
its validation error, a bounded number of times. An API that cannot be used raises PlannerUnavailable: the
caller falls back to the offline reader.
- `OpenAIPlanner`: the official OpenAI SDK, structured output (response_format json_schema). Env: OPENAI_API_KEY,
  optional OPENAI_BASE_URL (any OpenAI-compatible server), VIBE_RL_PLANNER_MODEL (default gpt-4o).
- `AnthropicPlanner`: the official Anthropic SDK, a forced tool whose input_schema is the answer's schema. Env:
  ANTHROPIC_API_KEY, optional ANTHROPIC_BASE_URL, VIBE_RL_PLANNER_MODEL (default claude-sonnet-4-5)."""

from __future__ import annotations

import json
import os
import re
from abc import ABC, abstractmethod
from typing import Any

from pydantic import ValidationError

from vibe_rl.errors import PlannerError, TemplateError, VibeRLError, field_errors
from vibe_rl.extras import require
from vibe_rl.scaffold.families import list_families, load_family, supported_text
from vibe_rl.scaffold.render import render_files
from vibe_rl.schema.spec import TaskSpec

INSTRUCTIONS = """You turn a researcher's description of an RL training task into a JSON object
{"plan": <TaskSpec>, "quotes": {<field>: <words of the description>}} that matches the given JSON schema exactly. Pick `family` from the template families below; copy the structure of
the family's example and change only what the description asks for (model path, GPUs, batch size, group size,
which team plays which model, static opponent models with their base_url and api_key_env, reward). Keep
server names, mode names, scripts and roles as in the example; leave out a mode the description excludes.
Never invent a value: write every default you pick into `notes`, and copy into `unparsed` each clause whose
number, path, env var or model name you could not place in the TaskSpec. If the description fits none of the
families, answer {"plan": {"family": "none", "notes": ["<why>"]}} instead of forcing one.

`quotes` proves every value you set: for each field whose value is not the family example's default, give the
exact words of the description that state it, copied verbatim (a number must appear in its quote; a path or a
model name too). Fields are named as: family, gpus, game.<parameter>, servers.<i>.model_path, servers.<i>.port,
servers.<i>.gpus, static_models.<i>.name, training.<field>, reward.win, reward.loss, modes (the mode list),
wire.<mode>.<role> (the model that plays a role in a mode). A value without a quote from the description, or
one quoted from a background sentence (another, an earlier or a possible later training), is not used: keep the default and copy
the clause into `unparsed` instead. Answer with the JSON object only."""


def system_prompt() -> str:
    from vibe_rl.planner.offline import OfflinePlanner
    from vibe_rl.planner.review import review

    parts = [INSTRUCTIONS, "", "Template families:"]
    for manifest in (m for m in list_families() if m.keywords):  # no keywords: only with --family
        parts.append(f"\n## {manifest.name}\n{manifest.description}\nroles: {manifest.roles}\nparameters: "
                     + json.dumps({k: p.model_dump() for k, p in manifest.parameters.items()}))
        for example in manifest.examples[:1]:
            try:
                text = (manifest.path / example).read_text(encoding="utf-8")
                spec = (planner := OfflinePlanner()).plan(text)
            except (VibeRLError, ValueError, OSError):  # an example the offline rules cannot read is not shown
                continue
            rows = review(spec, text, "offline", planner.read)
            quotes = {r["field"]: r["span"] for r in rows if r["from"] == "spec" and r["span"] in text}
            parts.append(f"example description:\n{text}\nexample answer:\n"
                         + json.dumps({"plan": spec.model_dump(mode="json"), "quotes": quotes}, ensure_ascii=False))
    return "\n".join(parts)


def schema() -> dict[str, Any]:
    """The answer's JSON schema: {"plan": TaskSpec, "quotes": {field: words of the spec}}."""
    plan = TaskSpec.model_json_schema()
    defs = plan.pop("$defs", {})
    return {"title": "QuotedTaskSpec", "type": "object", "$defs": defs, "required": ["plan", "quotes"],
            "properties": {"plan": plan, "quotes": {"type": "object", "additionalProperties": {"type": "string"},
                                                    "description": "field -> the spec's words that state its value"}}}


class PlannerUnavailable(PlannerError):
    """The LLM API could not be used (no connection, an HTTP error, no valid answer): fall back to offline."""


def renderable(data: Any) -> TaskSpec:
    """`data` as a TaskSpec that its family renders; ValueError saying what is wrong (fit to send back to an LLM)."""
    try:
        spec = TaskSpec.model_validate(data)
        render_files(spec, load_family(spec.family))
    except ValidationError as exc:
        raise ValueError(f"the JSON does not match the TaskSpec schema: {field_errors(exc)}") from exc
    except TemplateError as exc:
        raise ValueError(f"the TaskSpec cannot be rendered: {exc}") from exc
    return spec


def parse(raw: str, family: str | None = None) -> tuple[TaskSpec, dict[str, str]]:
    """Validate one answer -> (the TaskSpec, its quotes); raises ValueError with a message fit to send back to
    the model. A bare TaskSpec (no "plan" key) is read as a plan without quotes."""
    try:
        data = json.loads(re.sub(r"^```(?:json)?\s*|\s*```$", "", raw.strip()))
    except json.JSONDecodeError as exc:
        raise ValueError(f"the answer is not valid JSON ({exc}); reply with one JSON object") from exc
    quotes: dict[str, str] = {}
    if isinstance(data, dict) and isinstance(data.get("plan"), dict):
        if not isinstance(raw_quotes := data.get("quotes") or {}, dict):
            raise ValueError('"quotes" must be an object: field -> the words of the description that state it')
        quotes = {str(k): str(v) for k, v in raw_quotes.items() if isinstance(v, (str, int, float))}
        data = data["plan"]
    if isinstance(data, dict) and data.get("family") in ("none", None, ""):
        from vibe_rl.planner.offline import HOW_TO_GO_FURTHER

        why = "; ".join(map(str, data.get("notes") or [])) or "no reason given"
        raise PlannerError(f"The planner found no template family for this spec ({why}). {supported_text()} "
                           f"{HOW_TO_GO_FURTHER}")
    spec = renderable(data)
    if family is not None and spec.family != family:
        raise ValueError(f"the family must be {family} (the user chose it), not {spec.family}")
    return spec, quotes


class LLMPlanner(ABC):
    """Subclasses name their SDK (`sdk`: module, client class), API-key env var and default model, and
    implement `_ask(messages)`; `_retry(reply, error)` gives the messages that carry the error back."""

    name, sdk, key_env, key_help, default_model = "llm", ("", ""), "", "", ""

    def __init__(self, model: str | None = None, max_attempts: int = 3, **client_kwargs: Any):
        self.model = model or os.environ.get("VIBE_RL_PLANNER_MODEL", self.default_model)
        self.max_attempts = max_attempts
        client_class = getattr(require(self.sdk[0], f"the {self.name} planner"), self.sdk[1])
        if not (client_kwargs.get("api_key") or os.environ.get(self.key_env)):
            raise PlannerError(f"The {self.name} planner needs {self.key_env}{self.key_help}. Set it, or use "
                               "--planner offline.")
        self.client = client_class(**client_kwargs)
        self.system = system_prompt()

    def plan(self, text: str, family: str | None = None) -> TaskSpec:
        """The LLM's answer as it is (its quotes unchecked): `plan_quoted` is what vibe-rl new uses."""
        return self.plan_quoted(text, family)[0]

    def plan_quoted(self, text: str, family: str | None = None) -> tuple[TaskSpec, dict[str, str]]:
        """(the LLM's TaskSpec, its quotes); PlannerUnavailable when the API fails or gives no valid answer."""
        if not text.strip():
            raise PlannerError("The spec is empty. Describe the task to train.")
        content = text if family is None else f"{text}\n\n(Plan it as the {family} family.)"
        messages: list[dict[str, Any]] = [{"role": "user", "content": content}]
        error = ""
        for _ in range(self.max_attempts):
            try:
                raw, reply = self._ask(messages)
            except PlannerError:
                raise
            except Exception as exc:  # noqa: BLE001 - the SDK's connection/HTTP errors: the caller falls back
                raise PlannerUnavailable(f"the {self.name} API failed: {type(exc).__name__}: "
                                         f"{str(exc)[:300]}") from exc
            try:
                return parse(raw, family)
            except PlannerError:  # the model says no family fits: retrying will not help
                raise
            except ValueError as exc:
                error = str(exc)
                messages = messages + reply + self._retry(reply, error)
        raise PlannerUnavailable(f"The {self.name} planner gave no valid TaskSpec in {self.max_attempts} attempts. "
                           f"Last problem: {error[:1500]}\nTry --planner offline, or make the spec more explicit.")

    @abstractmethod
    def _ask(self, messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        """Send `messages`; return the raw TaskSpec JSON and the reply turns to append on a retry."""

    def _retry(self, reply: list[dict[str, Any]], error: str) -> list[dict[str, Any]]:
        return [{"role": "user", "content": f"That TaskSpec is invalid: {error}\nReply with the corrected JSON."}]


class OpenAIPlanner(LLMPlanner):
    name, sdk, default_model = "openai", ("openai", "OpenAI"), "gpt-4o"
    key_env, key_help = "OPENAI_API_KEY", " (and OPENAI_BASE_URL for a compatible server)"

    def _ask(self, messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        reply = self.client.chat.completions.create(
            model=self.model, messages=[{"role": "system", "content": self.system}, *messages],
            response_format={"type": "json_schema",
                             "json_schema": {"name": "QuotedTaskSpec", "schema": schema()}})
        content = reply.choices[0].message.content or ""
        return content, [{"role": "assistant", "content": content}]


TOOL = "submit_task_spec"  # the Anthropic planner's forced tool


class AnthropicPlanner(LLMPlanner):
    name, sdk, default_model = "anthropic", ("anthropic", "Anthropic"), "claude-sonnet-4-5"
    key_env = "ANTHROPIC_API_KEY"

    def _ask(self, messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        reply = self.client.messages.create(
            model=self.model, max_tokens=8192, system=self.system, messages=messages,
            tools=[{"name": TOOL, "description": "Submit the TaskSpec.", "input_schema": schema()}],
            tool_choice={"type": "tool", "name": TOOL})
        blocks = [block.model_dump(exclude_none=True) for block in reply.content]
        use = next((block for block in reply.content if block.type == "tool_use"), None)
        raw = "".join(getattr(b, "text", "") for b in reply.content) if use is None else json.dumps(use.input)
        return raw, [{"role": "assistant", "content": blocks or raw}]  # a tool use comes with its blocks

    def _retry(self, reply: list[dict[str, Any]], error: str) -> list[dict[str, Any]]:
        blocks = reply[0]["content"]
        use = next((b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"), None)
        return super()._retry(reply, error) if use is None else [{"role": "user", "content": [{
            "type": "tool_result", "tool_use_id": use["id"], "is_error": True,
            "content": f"Invalid TaskSpec: {error}\nCall the tool again, corrected."}]}]
