"""The TrainJob YAML of one swarm server (`config.yaml`, ...): only what the plan decided, one short comment a line.

A generated config lists the settings a researcher sets or the plan chose (the model, the GRPO sizes, the
learning rate, `max_tokens`, the step bound, the experiment folder, the static models) and any other field whose
planned value differs from the schema default. Every key it leaves out keeps the schema's default, documented
in docs/client.md ('The job'), so `TrainJob.from_yaml` of the file equals the job the plan builds.
"""

from __future__ import annotations

import math
from typing import Any

import yaml
from pydantic import BaseModel

from vibe_rl.schema.job import StaticModel, TrainJob
from vibe_rl.schema.spec import SPEC_FILE

# Written even when they equal the default: what a researcher looks for first.
ALWAYS = ("model.path", "rollout.max_tokens", "train.batch_size", "train.grpo_n", "train.lr", "train.total_steps",
          "experiment.dir")
COMMENTS = {
    "model.path": "the trainable model (Hugging Face folder; 'tiny': offline test model)",
    "model.max_model_len": "longest prompt + response in tokens",
    "rollout.temperature": "sampling temperature of the trainable model",
    "rollout.max_tokens": "cap on tokens per LLM call",
    "train.batch_size": "tasks (GRPO groups) per weight update",
    "train.grpo_n": "episodes per task (GRPO group size)",
    "train.lr": "learning rate (AdamW)",
    "train.save_freq": "checkpoint every N updates (0: never)",
    "train.total_steps": "stop after N updates (0: no limit)",
    "experiment.name": "experiment name in logs and metrics",
    "experiment.dir": "checkpoints, episodes and logs",
    "static_models": "frozen models episodes call by name; this server answers them",
    "static_models.name": "the model= name episodes call",
    "static_models.base_url": "OpenAI-compatible endpoint",
    "static_models.base_url_env": "env var holding the endpoint (read at server start)",
    "static_models.api_key_env": "env var holding the API key (never logged)",
    "static_models.upstream_model": "model name sent upstream",
    "static_models.local_path": "frozen local model served when no endpoint is set",
    "static_models.source": "a frozen snapshot of this server's own checkpoints",
}
COLUMN = 32  # comments start here (or two spaces after a longer line)


def header_lines(title: str) -> list[str]:
    """The file's header: `title` (the server line `vibe-rl doctor` reads) and where every default is documented."""
    return [f"# {title}",
            f"# Rendered from {SPEC_FILE}; edit freely. `vibe-rl doctor .` checks it against the roll scripts.",
            "# Only the planned settings are written: every other key keeps its default (docs/client.md, 'The job',",
            "# lists each with its meaning). Set one here, or for one run: vibe-rl run . --set model.lora.rank=16"]


def _comment(model: type[BaseModel], dotted: str, key: str) -> str:
    """The short comment of a key: COMMENTS, else the field description's first clause."""
    if dotted in COMMENTS:
        return COMMENTS[dotted]
    text = (model.model_fields[key].description or key).split(";")[0].split(". ")[0].strip() or key
    if len(text) > 70:
        text = text[:67].rsplit(" ", 1)[0] + " ..."
    return text[0].lower() + text[1:] if text[1:2].islower() else text


def _value(key: str, value: Any) -> list[str]:
    """`key: value` as YAML (one line for scalars and lists of scalars; values quoted where YAML needs it)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{key} = {value!r} is not a finite number")
    if isinstance(value, list):  # a list of scalars (experiment.loggers, lora.target_modules): one flow line
        flow = yaml.safe_dump(value, allow_unicode=False, default_flow_style=True, width=math.inf)
        text = f"{key}: {flow.strip()}"  # keys are field names: plain YAML
    else:
        text = yaml.safe_dump({key: value}, sort_keys=False, allow_unicode=False, default_flow_style=False,
                              width=math.inf)
    return text.rstrip("\n").split("\n")


def _entries(model: type[BaseModel], values: dict, defaults: dict, prefix: str, indent: int) -> list[tuple[str, str]]:
    """(line, comment) of the keys of one section that the plan set: in ALWAYS or off the default."""
    out: list[tuple[str, str]] = []
    pad = " " * indent
    for key, value in values.items():
        dotted = f"{prefix}{key}"
        sub = model.model_fields[key].annotation
        if isinstance(value, dict) and isinstance(sub, type) and issubclass(sub, BaseModel):
            inner = _entries(sub, value, defaults.get(key) or {}, f"{dotted}.", indent + 2)
            if inner:
                out += [(f"{pad}{key}:", "")] + inner
        elif dotted in ALWAYS or value != defaults.get(key):
            lines = _value(key, value)
            comment = _comment(model, dotted, key)
            if len(lines) > 1:  # a multi-line value: its comment goes above it
                out += [(f"{pad}# {comment}", "")] + [(pad + line, "") for line in lines]
            else:
                out.append((pad + lines[0], comment))
    return out


def _static(models: list[dict]) -> list[tuple[str, str]]:
    defaults = {name: f.default for name, f in StaticModel.model_fields.items() if name != "name"}
    out: list[tuple[str, str]] = [("static_models: []" if not models else "static_models:",
                                   "none on this server" if not models else COMMENTS["static_models"])]
    for model in models:
        kept = {k: v for k, v in model.items() if k == "name" or v != defaults.get(k)}
        for i, (line, comment) in enumerate(_entries(StaticModel, kept, defaults, "static_models.", 2)):
            out.append((("- " + line[2:]) if i == 0 else line, comment))
    return out


def job_yaml(job: TrainJob, title: str) -> str:
    """The YAML text of `job` for a generated project: the header, then the planned keys, commented."""
    full, defaults = job.model_dump(mode="json"), TrainJob().model_dump(mode="json")
    rows: list[tuple[str, str]] = []
    for section in ("model", "rollout", "train", "experiment"):
        sub = TrainJob.model_fields[section].annotation
        inner = _entries(sub, full[section], defaults[section], f"{section}.", 2)
        if inner:
            rows += [(f"{section}:", "")] + inner
    rows += _static(full["static_models"])
    lines = header_lines(title)
    for line, comment in rows:
        lines.append(f"{line.ljust(COLUMN - 1)} # {comment}" if comment and len(line) < COLUMN - 1
                     else f"{line}  # {comment}" if comment else line)
    return "\n".join(lines) + "\n"
