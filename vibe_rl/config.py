"""Load pydantic configs from YAML with `key.sub=value` overrides."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from vibe_rl.errors import ConfigError

M = TypeVar("M", bound=BaseModel)


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply `a.b.c=value` strings to a nested dict; values are parsed as YAML scalars."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"Override '{item}' has no '='. Write it as key.sub=value, e.g. train.lr=1e-5")
        key, raw = item.split("=", 1)
        node = data
        *parents, leaf = key.strip().split(".")
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"Override '{item}': '{part}' is not a section")
        node[leaf] = yaml.safe_load(raw)
    return data


def load_yaml(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"Config file {path} does not exist. Check the path, or omit --config to use defaults.")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a YAML mapping at the top level, not {type(data).__name__}")
    return data


def load_config(model: type[M], path: str | Path | None = None, overrides: list[str] | None = None,
                section: str | None = None) -> M:
    """Build `model` from an optional YAML file (optionally one top-level `section`) plus overrides."""
    data: dict[str, Any] = load_yaml(path) if path else {}
    if section and section in data:
        data = data[section]
    data = apply_overrides(data, overrides or [])
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        where = f" in {path}" if path else ""
        raise ConfigError(f"Invalid {model.__name__}{where}:\n{exc}") from exc
