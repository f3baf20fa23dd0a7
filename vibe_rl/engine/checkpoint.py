"""Checkpoints of the torch engine: weights, optimizer state, step.

Layout of a checkpoint directory:

    model/          full weights as an HF directory (safetensors + tokenizer), loadable on its own
    adapter/        instead of model/ when LoRA is on: the peft adapter (adapter_model.safetensors)
    optimizer.pt    the AdamW state (absent for a frozen engine)
    state.json      {"step", "version", "nan_skipped_total", "lora", "base_model", "rng"}

Written into a temporary sibling directory and renamed into place, so a crash
mid-save never leaves a half checkpoint under the final name.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from vibe_rl.errors import ModelLoadError
from vibe_rl.extras import require

STATE = "state.json"


def save_checkpoint(engine: Any, directory: Path) -> Path:
    torch = require("torch", "saving a checkpoint")
    directory = directory.resolve()
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = directory.parent / f".{directory.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        if engine.lora:
            engine.model.save_pretrained(tmp / "adapter", safe_serialization=True)
        else:
            engine.model.save_pretrained(tmp / "model", safe_serialization=True)
            engine.tokenizer.save_pretrained(tmp / "model")
        if engine.optimizer is not None:
            torch.save(engine.optimizer.state_dict(), tmp / "optimizer.pt")
        state = {"step": engine.step, "version": engine.version, "nan_skipped_total": engine.nan_skipped_total,
                 "lora": engine.lora, "base_model": str(engine.path), "rng": list(_flatten(engine._rng.getstate()))}
        (tmp / STATE).write_text(json.dumps(state, indent=2))
        old = directory.parent / f".{directory.name}.old-{os.getpid()}"
        if directory.exists():
            os.rename(directory, old)
        os.rename(tmp, directory)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return directory


def load_checkpoint(engine: Any, directory: Path) -> None:
    torch = require("torch", "loading a checkpoint")
    safetensors = require("safetensors.torch", "loading a checkpoint")
    state_file = directory / STATE
    if not state_file.is_file():
        raise ModelLoadError(f"{directory} is not a vibe-rl checkpoint (no {STATE}). Pass a directory that "
                             "engine.save() wrote, e.g. <experiment>/checkpoints/step_5.")
    state = json.loads(state_file.read_text())
    if bool(state.get("lora")) != bool(engine.lora):
        raise ModelLoadError(f"{directory} was saved with lora={state.get('lora')} but this engine has "
                             f"lora={engine.lora}; set model.lora.rank to match the checkpoint.")
    if engine.lora:
        peft = require("peft", "loading a LoRA checkpoint")
        weights = safetensors.load_file(str(directory / "adapter" / "adapter_model.safetensors"), device=engine.device)
        result = peft.set_peft_model_state_dict(engine.model, weights)
        unexpected = getattr(result, "unexpected_keys", [])
        if unexpected:
            raise ModelLoadError(f"The adapter in {directory} does not fit this model: unexpected {unexpected[:3]}")
    else:
        full: dict[str, Any] = {}
        for f in sorted((directory / "model").glob("*.safetensors")):
            full.update(safetensors.load_file(str(f), device=str(engine.device)))
        missing, unexpected = engine.model.load_state_dict(full, strict=False)
        tied = {"lm_head.weight"} if getattr(engine.model.config, "tie_word_embeddings", False) else set()
        if unexpected or set(missing) - tied:
            raise ModelLoadError(f"The weights in {directory}/model do not fit this model "
                                 f"(missing {sorted(set(missing) - tied)[:3]}, unexpected {unexpected[:3]}).")
        if tied:
            engine.model.tie_weights()
    opt_file = directory / "optimizer.pt"
    if engine.optimizer is not None and opt_file.is_file():
        engine.optimizer.load_state_dict(torch.load(opt_file, map_location=engine.device, weights_only=True))
    engine.step, engine.version = int(state["step"]), int(state["version"])
    engine.nan_skipped_total = int(state.get("nan_skipped_total", 0))
    if state.get("rng"):
        engine._rng.setstate(_unflatten(state["rng"]))


def _flatten(rng_state: tuple) -> list:
    version, internal, gauss = rng_state
    return [version, list(internal), gauss]


def _unflatten(data: list) -> tuple:
    version, internal, gauss = data
    return (version, tuple(internal), gauss)
