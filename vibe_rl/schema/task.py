"""What a client hands the swarm: tasks, episode credentials and episode results."""

from __future__ import annotations

import math
import numbers
from typing import Any

from pydantic import BaseModel, Field, field_validator, model_validator


def extra_keys_in_metadata(model: type[BaseModel], data: Any) -> Any:
    """`{"reward": 1, "winner": "a"}` -> `{"reward": 1, "metadata": {"winner": "a"}}`: a key that is not a field of
    `model` joins its `metadata`, so nothing a client gives is dropped; a key given both ways is an error."""
    if not isinstance(data, dict) or not isinstance(data.get("metadata") or {}, dict):
        return data  # not an object, or metadata that is not one: their own validation errors say so
    extra = {k: v for k, v in data.items() if k not in model.model_fields}
    if not extra:
        return data
    metadata = data.get("metadata") or {}
    both = sorted(set(extra) & set(metadata))
    if both:
        fields = "/".join(model.model_fields)
        raise ValueError(f"{both[0]!r} is given both as a {model.__name__} field and in metadata; keep one "
                         f"({model.__name__} keeps keys other than {fields} in metadata)")
    return {**{k: v for k, v in data.items() if k not in extra}, "metadata": {**metadata, **extra}}


class Task(BaseModel):
    """One training task. Episodes that share a `task_id` form one GRPO group."""

    task_id: str = Field(description="Stable, non-empty id of the task (e.g. the episode seed); the GRPO group key")
    main_query: str = Field(default="", description="The task's main prompt or a short summary of it")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Free-form task data (words, seed, ...)")

    @model_validator(mode="before")
    @classmethod
    def _extra_keys_are_metadata(cls, data: Any) -> Any:
        """Task(task_id="3", words=[...]) keeps `words` in metadata: nothing given is dropped."""
        return extra_keys_in_metadata(cls, data)

    @field_validator("task_id", mode="before")
    @classmethod
    def _non_empty(cls, value: Any) -> str:
        text = "" if value is None else str(value)
        if not text.strip():
            raise ValueError(
                "task_id is empty. GRPO compares episodes of the same task, so every task needs its own "
                "non-empty id; use the episode's seed, e.g. Task(task_id=str(seed), ...)"
            )
        return text


class WorkflowOutput(BaseModel):
    """The result of one episode, reported to the server that served its trainable calls."""

    reward: float = Field(description="Finite scalar reward of the episode for this server's model")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Free-form episode info (winner, rounds, ...)")

    @model_validator(mode="before")
    @classmethod
    def _extra_keys_are_metadata(cls, data: Any) -> Any:
        """WorkflowOutput(reward=1, winner="a") keeps `winner` in metadata: nothing given is dropped."""
        return extra_keys_in_metadata(cls, data)

    @field_validator("reward", mode="before")
    @classmethod
    def _finite(cls, value: Any) -> float:
        # numbers.Real also takes NumPy / torch-free scalars such as numpy.float32 (a reward computed with NumPy)
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ValueError(f"reward must be a finite number, got {type(value).__name__} {value!r}"
                             + ("; send a number, not a string (float(text) in Python)" if isinstance(value, str) else "")
                             + ("; pass one number, e.g. float(x.item())" if hasattr(value, "item") else ""))
        try:
            value = float(value)
        except OverflowError:  # an int beyond float's range
            raise ValueError(f"reward {str(value)[:20]}... is too large for a float; scale rewards to a sensible "
                             "range (a server takes |reward| <= its max_abs_reward, 1e6 by default)") from None
        if not math.isfinite(value):
            raise ValueError(f"reward must be a finite number, got {value!r}; clamp or replace NaN/inf before "
                             "ep.end(reward) / end_episode")
        return float(value)


class OpenaiBaseUrlAndApiKey(BaseModel):
    """Credentials of one episode: use them with `openai.OpenAI(base_url=..., api_key=...)`."""

    base_url: str = Field(description="OpenAI-compatible base URL, ending in /v1")
    api_key: str = Field(description="Random key that belongs to this episode alone")
    model: str = Field(description="Model name to pass as `model=` for the trainable model")
