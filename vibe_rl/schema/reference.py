"""Markdown reference tables generated from the pydantic schema (every field, its default, its description).

docs/client.md holds the TrainJob table between `<!-- job-reference:start -->` and `<!-- job-reference:end -->`;
a test keeps it equal to `job_reference()`. Rewrite it after a schema change with

    python -m vibe_rl.schema.reference docs/client.md
"""

from __future__ import annotations

import json
import re
import sys
import typing
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

START, END = "<!-- job-reference:start -->", "<!-- job-reference:end -->"


def _model_of(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """(the BaseModel inside an annotation, whether it is a list of them)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is list and args and isinstance(args[0], type) and issubclass(args[0], BaseModel):
        return args[0], True
    return None, False


def _type_name(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None) if isinstance(annotation, type) else None
    text = text or str(annotation).replace("typing.", "")
    return re.sub(r"\b[\w.]+\.(\w+)", r"\1", text).replace("NoneType", "None")


def _default(field: Any) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "required"
    value = field.default_factory() if field.default is PydanticUndefined else field.default
    value = value.value if isinstance(value, Enum) else value
    return json.dumps(value) if value is not None else "null"


def rows(model: type[BaseModel], prefix: str = "") -> list[tuple[str, str, str, str]]:
    """(dotted path, type, default, description) of every leaf field, nested models flattened."""
    out = []
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        inner, is_list = _model_of(field.annotation)
        if inner is not None:
            out += rows(inner, f"{path}[]." if is_list else f"{path}.")
        else:
            out.append((path, _type_name(field.annotation), _default(field), field.description or ""))
    return out


def table(model: type[BaseModel]) -> str:
    """The markdown table of every leaf field of `model` (path, type, default, description)."""
    lines = ["| Field | Type | Default | Description |", "|---|---|---|---|"]
    for path, kind, default, description in rows(model):
        cells = [f"`{path}`", f"`{kind}`", f"`{default}`", description]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def job_reference() -> str:
    from vibe_rl.schema import TrainJob

    return table(TrainJob)


def rewrite(doc: Path, start: str = START, end: str = END, text_of=job_reference) -> bool:
    """Put the current table between the markers of `doc`; True when it changed."""
    text = doc.read_text(encoding="utf-8")
    head, sep, rest = text.partition(start)
    _, sep2, tail = rest.partition(end)
    if not (sep and sep2):
        raise SystemExit(f"{doc} has no {start} ... {end} markers")
    new = f"{head}{start}\n{text_of()}\n{end}{tail}"
    doc.write_text(new, encoding="utf-8")
    return new != text


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(f"{arg}: {'rewritten' if rewrite(Path(arg)) else 'up to date'}")
