"""What `ep.end` / `eps.end` send, checked before anything is sent: a WorkflowOutput per episode whose metadata,
like the task, has a JSON form (else a ConfigError that names the value and the fix)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vibe_rl.errors import ConfigError, SwarmError
from vibe_rl.schema import WorkflowOutput


def end_output(reward: float | WorkflowOutput, metadata: dict[str, Any] | None) -> WorkflowOutput:
    """What `ep.end(reward, metadata)` sends: a WorkflowOutput (one given with `metadata` is a ConfigError)."""
    if isinstance(reward, WorkflowOutput) and metadata is not None:
        raise ConfigError("ep.end got a WorkflowOutput and a metadata argument; the metadata would be lost. "
                          "Pass ep.end(WorkflowOutput(reward=r, metadata={...})) or ep.end(r, {...}).")
    return reward if isinstance(reward, WorkflowOutput) else WorkflowOutput(reward=reward, metadata=metadata or {})


def checked_outputs(episodes: Mapping[str, Any], outputs: Mapping[str, float | WorkflowOutput]
                    ) -> dict[str, WorkflowOutput]:
    """`eps.end`'s outputs, one per episode name, each checked (its metadata JSON), with every task, before any
    episode ends: a bad reward of the second team must not leave the first team's episode stored while the
    second one is aborted. A missing or unknown name is a SwarmError (a misspelt name sends nothing)."""
    missing, unknown = sorted(set(episodes) - set(outputs)), sorted(set(outputs) - set(episodes))
    if missing or unknown:
        raise SwarmError(f"eps.end needs exactly one output per episode name {sorted(episodes)}; "
                         + (f"missing {missing}" if missing else "") + ("; " if missing and unknown else "")
                         + (f"unknown {unknown}" if unknown else "") + ".")
    checked = {name: _as_output(outputs[name]) for name in episodes}
    for episode in episodes.values():
        as_json(episode.task, "the task")
    return checked


def _as_output(value: float | WorkflowOutput) -> WorkflowOutput:
    output = value if isinstance(value, WorkflowOutput) else WorkflowOutput(reward=value)
    as_json(output, "ep.end's metadata")
    return output


def _non_json(value: Any, path: str) -> tuple[str, Any] | None:
    """The first value under `value` that has no JSON form, with its path (None when all do)."""
    if isinstance(value, Mapping):
        items = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    elif value is None or isinstance(value, (str, int, float, bool)):
        return None
    else:
        return path, value
    for key, item in items:
        found = _non_json(item, f"{path}[{key!r}]")
        if found:
            return found
    return None


def as_json(model: Any, what: str) -> dict[str, Any]:
    """`model.model_dump(mode="json")`, or a ConfigError that names the value with no JSON form and the fix."""
    from pydantic_core import PydanticSerializationError

    try:
        return model.model_dump(mode="json")
    except PydanticSerializationError as exc:
        found = _non_json(model.metadata, "metadata")
        where = f"{found[0]} is a {type(found[1]).__module__}.{type(found[1]).__name__}" if found else str(exc)
        raise ConfigError(f"{what} must be JSON: {where}. Convert it before sending: NumPy arrays with .tolist(), "
                          "NumPy numbers with float() / int(), other objects with str() or a dict.") from None
