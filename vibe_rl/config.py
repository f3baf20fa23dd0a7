"""Load pydantic configs from YAML with `key.sub=value` overrides."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any, TypeVar, get_args

import yaml
from pydantic import BaseModel, ValidationError

from vibe_rl.errors import ConfigError, field_errors

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


def unknown_keys(model: type[BaseModel], data: Any, where: str = "") -> list[str]:
    """Dotted names of the keys in `data` that `model` (recursively) has no field for: a misspelt
    setting (`trian.lr`, `rollout.max_token`) would otherwise be dropped and its default trained with."""
    if not isinstance(data, dict):
        return []
    out = []
    for key, value in data.items():
        field = model.model_fields.get(key)
        if field is None:
            out.append(f"{where}{key}")
            continue
        sub = next((t for t in (field.annotation, *get_args(field.annotation))
                    if isinstance(t, type) and issubclass(t, BaseModel)), None)
        if sub is None:  # list[StaticModel] and the like
            sub = next((a for t in get_args(field.annotation) for a in get_args(t) or (t,)
                        if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if sub is not None:
            for i, item in enumerate(value if isinstance(value, list) else [value]):
                out += unknown_keys(sub, item, f"{where}{key}{f'[{i}]' if isinstance(value, list) else ''}.")
    return out


def _fields_at(model: type[BaseModel], dotted: str) -> list[str]:
    """The field names of the (sub)model that holds the last part of `dotted` ("train.lerning_rate")."""
    for part in re.sub(r"\[\d+\]", "", dotted).split(".")[:-1]:
        field = model.model_fields.get(part)
        types = [field.annotation, *get_args(field.annotation)] if field else []
        types += [a for t in list(types) for a in get_args(t)]
        sub = next((t for t in types if isinstance(t, type) and issubclass(t, BaseModel)), None)
        if sub is None:
            return []
        model = sub
    return list(model.model_fields)


# What other RL tools call some settings (TRL, verl, HF generate) -> the field here
ALIASES = {"learning_rate": "lr", "num_generations": "grpo_n", "group_size": "grpo_n", "n": "grpo_n",
           "rollout_n": "grpo_n", "max_new_tokens": "max_tokens", "max_completion_length": "max_tokens",
           "model_name_or_path": "path", "model_path": "path", "lora_rank": "lora", "beta": "kl_coef",
           "kl_coeff": "kl_coef", "epsilon": "clip_eps", "clip_ratio": "clip_eps", "warmup": "warmup_steps",
           "per_device_train_batch_size": "micro_batch_size"}


def unknown_keys_message(model: type[BaseModel], unknown: list[str], where: str) -> str:
    """'Unknown keys in job.yaml: train.lerning_rate (did you mean train.lr?) ...' with the fix."""
    named = []
    for key in unknown[:10]:
        head, _, last = key.rpartition(".")
        fields = _fields_at(model, key)
        names = fields + [a for a, target in ALIASES.items() if target in fields]
        close = [ALIASES.get(m, m) for m in difflib.get_close_matches(last.lower(), names, n=1, cutoff=0.6)]
        named.append(f"{key} (did you mean {head + '.' if head else ''}{close[0]}?)" if close else key)
    return (f"Unknown {model.__name__} key(s){where}: {', '.join(named)}. Fix their spelling or remove them "
            "(they would be ignored and their defaults used); every key is listed in docs/client.md, 'The job'.")


def load_config(model: type[M], path: str | Path | None = None, overrides: list[str] | None = None,
                section: str | None = None) -> M:
    """Build `model` from an optional YAML file (optionally one top-level `section`) plus overrides."""
    data: dict[str, Any] = load_yaml(path) if path else {}
    if section and section in data:
        data = data[section]
    data = apply_overrides(data, overrides or [])
    unknown = unknown_keys(model, data)
    if unknown:
        raise ConfigError(unknown_keys_message(model, unknown, f" in {path}" if path else ""))
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        where = f" in {path}" if path else ""
        raise ConfigError(f"Invalid {model.__name__}{where}: {field_errors(exc)}. Set valid values; every key is "
                          "described in docs/client.md, 'The job'.") from None
