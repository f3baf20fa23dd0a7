"""Bounds of what one request may ask for, checked before anything reaches the engine or the store.

Each check raises `ApiError(400)` naming the field and the limit (the limits live in
`ServerConfig`: max_abs_reward, max_task_id_chars (also a begin's group), max_metadata_bytes, max_messages,
max_discard_timeout), or 503 when max_running_episodes are open; per episode, calls and stored request
bytes (max_episode_calls, max_episode_bytes: 413). Request size (413) and
content type are checked earlier, by `guard.py`.
"""

from __future__ import annotations

import json
import math

from vibe_rl.swarm.protocol import ChatCompletionRequest, EndEpisodeRequest
from vibe_rl.swarm.server.config import ServerConfig
from vibe_rl.swarm.server.errors import ApiError


def check_end(cfg: ServerConfig, req: EndEpisodeRequest) -> None:
    """Bounds of an end request (400 with the field), before anything is stored."""
    reward = req.output.reward
    if not (math.isfinite(reward) and abs(reward) <= cfg.max_abs_reward):
        raise ApiError(400, f"reward {reward!r} is out of range: rewards must be finite with |reward| <= "
                            f"{cfg.max_abs_reward:g} (ServerConfig.max_abs_reward). Scale or clip it.",
                       code="reward_out_of_range", param="output.reward")
    if len(req.task.task_id) > cfg.max_task_id_chars:
        raise ApiError(400, f"task_id has {len(req.task.task_id)} characters; at most {cfg.max_task_id_chars} "
                            "are accepted. Use a short stable id (e.g. the seed).", code="task_id_too_long",
                       param="task.task_id")
    size = len(json.dumps([req.task.model_dump(mode="json"), req.output.metadata], ensure_ascii=False,
                          default=str).encode())
    if size > cfg.max_metadata_bytes:
        raise ApiError(400, f"The task and output metadata take {size} bytes as JSON; at most "
                            f"{cfg.max_metadata_bytes} are accepted. Store large artefacts elsewhere and "
                            "keep a reference.", code="metadata_too_large", param="output.metadata")


def check_group(cfg: ServerConfig, group: str | None) -> None:
    """A begin's group key: as long as a task_id may be (it takes the task_id's place in the pool and store)."""
    if group is not None and len(group) > cfg.max_task_id_chars:
        raise ApiError(400, f"group has {len(group)} characters; at most {cfg.max_task_id_chars} are accepted "
                            "(max_task_id_chars). Use a short stable key (e.g. the seed).", code="group_too_long",
                       param="group")


def check_discard_timeout(cfg: ServerConfig, timeout: float | None) -> None:
    cap = cfg.max_discard_timeout
    if timeout is not None and not (math.isfinite(timeout) and 0 < timeout <= cap):
        raise ApiError(400, f"discard_episode_timeout must be a finite number of seconds in (0, {cap:g}]; got "
                            f"{timeout!r}.", code="invalid_request", param="discard_episode_timeout")


def check_running(cfg: ServerConfig, running: int) -> None:
    """Episodes begun and never ended hold memory until their idle timeout: at most max_running_episodes."""
    if running >= cfg.max_running_episodes:
        raise ApiError(503, f"{running} episodes are running, the most this server keeps open "
                            "(ServerConfig.max_running_episodes). End or abort the episodes you no longer play "
                            "(ep.end / ep.abort; POST /episode/end or /episode/abort): one left open is kept until "
                            f"its idle timeout discards it ({cfg.default_discard_timeout:g} s unless begun with "
                            "another).", code="too_many_running_episodes")


MAX_NAME_CHARS = 256  # a message's name, tool_call_id, a tool call's function name (OpenAI: 64 for tool names)
MAX_TOOL_NAME_CHARS = 64


def check_messages(cfg: ServerConfig, req: ChatCompletionRequest) -> None:
    """Messages and tools of a chat call, measured by their real size (JSON) before anything renders them."""
    if len(req.messages) > cfg.max_messages:
        raise ApiError(400, f"The call has {len(req.messages)} messages; at most {cfg.max_messages} are "
                            "accepted (ServerConfig.max_messages). Keep only recent turns.",
                       code="too_many_messages", param="messages")
    tools = req.tools or []
    if len(tools) > cfg.max_tools:
        raise ApiError(400, f"The call has {len(tools)} tools; at most {cfg.max_tools} are accepted "
                            "(ServerConfig.max_tools). Offer the tools this turn needs.", code="too_many_tools",
                       param="tools")
    size = len(json.dumps(tools, ensure_ascii=False, default=str).encode()) if tools else 0
    if size > cfg.max_tools_bytes:
        raise ApiError(400, f"The tool schemas take {size} bytes as JSON; at most {cfg.max_tools_bytes} are accepted "
                            "(ServerConfig.max_tools_bytes). Shorten their descriptions and parameters.",
                       code="tools_too_large", param="tools")
    for i, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, dict) else None
        name = fn.get("name") if isinstance(fn, dict) else None
        if isinstance(name, str) and len(name) > MAX_TOOL_NAME_CHARS:
            raise ApiError(400, f"tools[{i}].function.name has {len(name)} characters; at most "
                                f"{MAX_TOOL_NAME_CHARS} (as OpenAI).", code="invalid_tools", param=f"tools.{i}")


def check_tool_calls(req: ChatCompletionRequest) -> None:
    """Assistant tool_calls must be OpenAI-shaped (function.name a string, arguments a string or object): 400."""
    for i, message in enumerate(req.messages):
        for field in ("name", "tool_call_id"):
            value = getattr(message, field)
            if value is not None and len(value) > MAX_NAME_CHARS:
                raise ApiError(400, f"messages[{i}].{field} has {len(value)} characters; at most {MAX_NAME_CHARS}.",
                               code="invalid_request", param=f"messages.{i}.{field}")
        for k, call in enumerate(message.tool_calls or []):
            fn = call.get("function")
            if isinstance(fn, dict) and isinstance(fn.get("name"), str) and len(fn["name"]) > MAX_NAME_CHARS:
                raise ApiError(400, f"messages[{i}].tool_calls[{k}].function.name has {len(fn['name'])} characters; "
                                    f"at most {MAX_NAME_CHARS}.", code="invalid_tool_calls",
                               param=f"messages.{i}.tool_calls")
            if not (isinstance(fn, dict) and isinstance(fn.get("name"), str)
                    and isinstance(fn.get("arguments", ""), (str, dict))):
                raise ApiError(400, f"messages[{i}].tool_calls[{k}] is malformed: it needs "
                                    '{"type": "function", "function": {"name": "<str>", "arguments": "<JSON str>"}}.',
                               code="invalid_tool_calls", param=f"messages.{i}.tool_calls")


def check_episode(cfg: ServerConfig, ep, request_bytes: int) -> None:
    """Per-episode bounds of a chat call: calls and stored request bytes (413 with the limit); admits the call."""
    if ep.admitted >= cfg.max_episode_calls:
        raise ApiError(413, f"Episode {ep.uuid} has made {ep.admitted} LLM calls, the most one episode may make "
                            f"(ServerConfig.max_episode_calls = {cfg.max_episode_calls}). End it and begin another.",
                       code="episode_too_many_calls")
    if ep.stored_bytes + request_bytes > cfg.max_episode_bytes:
        raise ApiError(413, f"Episode {ep.uuid} would store {ep.stored_bytes + request_bytes} request bytes, more "
                            f"than one episode may (ServerConfig.max_episode_bytes = {cfg.max_episode_bytes}). Send "
                            "shorter conversations (keep recent turns), or end the episode and begin another.",
                       code="episode_too_large")
    ep.admitted += 1
    ep.stored_bytes += request_bytes
