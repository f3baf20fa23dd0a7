"""Checkpoints of the torch engine: weights, optimizer state, step.

Layout of a checkpoint directory:

    model/          full weights as an HF directory (safetensors + tokenizer), loadable on its own
    adapter/        instead of model/ when LoRA is on: the peft adapter (adapter_model.safetensors)
    merged/         (LoRA only, written on first use by `merged_weights`) base + adapter as full weights
    optimizer.pt    the AdamW state keyed by parameter name (absent for a frozen engine)
    state.json      {"step", "version", "nan_skipped_total", "lora", "base_model", "rng", "world_size"}

Written into a temporary sibling directory and renamed into place, so a crash
mid-save never leaves a half checkpoint under the final name.

Resharding: a checkpoint holds full tensors only (weights as an HF directory, the optimizer
state keyed by parameter name, not by position or shard), so one written by a server on N
GPUs resumes on M: a sharded server (`vibe_rl.engine.dist_engine`) gathers the full state on
rank 0 to save, and loads it on rank 0 and shards it over its ranks. Older checkpoints whose
optimizer state is keyed by position still load.
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


def save_checkpoint(engine: Any, directory: Path, optimizer_state: dict[str, Any] | None = None,
                    world_size: int = 1, model_state: dict[str, Any] | None = None) -> Path:
    """Write `engine`'s weights and state; `optimizer_state` (already keyed by name) replaces the
    engine's own optimizer, `model_state` (full tensors) its weights: a sharded server passes what it
    gathered."""
    torch = require("torch", "saving a checkpoint")
    directory = directory.resolve()
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = directory.parent / f".{directory.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        given = {"state_dict": model_state} if model_state is not None else {}
        if engine.lora:
            engine.model.save_pretrained(tmp / "adapter", safe_serialization=True, **given)
        else:
            engine.model.save_pretrained(tmp / "model", safe_serialization=True, **given)
            _plain_architectures(tmp / "model" / "config.json")
            engine.tokenizer.save_pretrained(tmp / "model")
        if optimizer_state is None and engine.optimizer is not None:
            optimizer_state = named_optimizer_state(engine.optimizer.state_dict(), trainable_names(engine.model))
        if optimizer_state is not None:
            torch.save(optimizer_state, tmp / "optimizer.pt")
        state = {"step": engine.step, "version": engine.version, "nan_skipped_total": engine.nan_skipped_total,
                 "lora": engine.lora, "base_model": str(engine.path), "rng": list(_flatten(engine._rng.getstate())),
                 "world_size": world_size}
        (tmp / STATE).write_text(json.dumps(state, indent=2))
        old = directory.parent / f".{directory.name}.old-{os.getpid()}"
        if directory.exists():
            os.rename(directory, old)
        os.rename(tmp, directory)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return directory


def merged_weights(directory: Path) -> Path:
    """The full weights of a checkpoint as an HF directory: `model/`, or for a LoRA checkpoint its base model
    (state.json's base_model) with the adapter merged in (`merge_adapter`), written once to `merged/` (via a
    temporary sibling and a rename) and reused after. A frozen copy of a past step is served from it
    (checkpoint-sourced static models)."""
    from vibe_rl.engine.loader import resolve_model_path

    directory = Path(directory)
    if (directory / "model").is_dir():
        return directory / "model"
    out = directory / "merged"
    if (out / "config.json").is_file():
        return out
    if not (directory / "adapter").is_dir():
        raise ModelLoadError(f"{directory} holds neither model/ nor adapter/: it is not a complete checkpoint.")
    base = json.loads((directory / STATE).read_text()).get("base_model")
    try:
        base_path = resolve_model_path(base or "")
    except ModelLoadError as exc:
        raise ModelLoadError(f"{exc} (the base model of the LoRA checkpoint {directory}, named in its {STATE}; put "
                             "it back at that path to serve this checkpoint)") from None
    tmp = directory / f".merged.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        merge_adapter(directory / "adapter", base_path, tmp)
        os.rename(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def merge_adapter(adapter: Path, base_path: Path, into: Path) -> None:
    """Write the base model at `base_path` with the peft `adapter` merged in (W + B A alpha / r, in float32) and
    the base's tokenizer to `into`, an HF directory loadable on its own (`vibe-rl export --merge-lora` too)."""
    from vibe_rl.engine.loader import load_causal_lm, load_tokenizer

    peft = require("peft", "merging a LoRA adapter")
    torch = require("torch", "merging a LoRA adapter")
    model = load_causal_lm(base_path, "cpu", torch.float32)
    merged = peft.PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
    merged.save_pretrained(into, safe_serialization=True)
    load_tokenizer(base_path).save_pretrained(into)


def _plain_architectures(config_file: Path) -> None:
    """FSDP2 renames a sharded model's class ("FSDPQwen2ForCausalLM"); the checkpoint names the model's own."""
    config = json.loads(config_file.read_text())
    names = config.get("architectures") or []
    plain = [n[len("FSDP"):] if n.startswith("FSDP") else n for n in names]
    if plain != names:
        config["architectures"] = plain
        config_file.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def read_state(engine: Any, directory: Path) -> dict[str, Any]:
    """A checkpoint's state.json, checked against `engine` (a directory engine.save() wrote, same LoRA-ness)."""
    state_file = directory / STATE
    if not state_file.is_file():
        raise ModelLoadError(f"{directory} is not a vibe-rl checkpoint (no {STATE}). Pass a directory that "
                             "engine.save() wrote, e.g. <experiment>/checkpoints/step_5.")
    state = json.loads(state_file.read_text())
    if bool(state.get("lora")) != bool(engine.lora):
        raise ModelLoadError(f"{directory} was saved with lora={state.get('lora')} but this engine has "
                             f"lora={engine.lora}; set model.lora.rank to match the checkpoint.")
    return state


def read_weights(engine: Any, directory: Path, names: list[str]) -> dict[str, Any]:
    """A checkpoint's trained weights on the CPU, keyed by `names` (the model's trainable parameters),
    without loading them into a model (a sharded server shards them itself)."""
    safetensors = require("safetensors.torch", "loading a checkpoint")
    if engine.lora:  # the adapter file drops peft's adapter name: "...lora_A.default.weight" -> "...lora_A.weight"
        saved = safetensors.load_file(str(directory / "adapter" / "adapter_model.safetensors"), device="cpu")
        weights = {n: saved.get(n.replace(".default.", ".")) for n in names}
    else:
        saved = {}
        for f in sorted((directory / "model").glob("*.safetensors")):
            saved.update(safetensors.load_file(str(f), device="cpu"))
        weights = {n: saved.get(n) for n in names}
    missing = sorted(n for n, w in weights.items() if w is None)
    if missing:
        raise ModelLoadError(f"The weights in {directory} do not fit this model (missing {missing[:3]}); "
                             "resume with the model the checkpoint was trained from.")
    return weights


def restore_counters(engine: Any, state: dict[str, Any]) -> None:
    engine.step, engine.version = int(state["step"]), int(state["version"])
    engine.nan_skipped_total = int(state.get("nan_skipped_total", 0))
    if state.get("rng"):
        engine._rng.setstate(_unflatten(state["rng"]))


def load_checkpoint(engine: Any, directory: Path) -> None:
    require("torch", "loading a checkpoint")
    safetensors = require("safetensors.torch", "loading a checkpoint")
    state = read_state(engine, directory)
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
    if engine.optimizer is not None:
        saved = read_optimizer_state(directory, engine.device)
        if saved is not None:
            engine.optimizer.load_state_dict(positional_optimizer_state(saved, trainable_names(engine.model)))
    restore_counters(engine, state)


def read_optimizer_state(directory: Path, device: Any = "cpu") -> dict[str, Any] | None:
    """optimizer.pt of a checkpoint (None when there is none)."""
    torch = require("torch", "loading a checkpoint")
    opt_file = directory / "optimizer.pt"
    if not opt_file.is_file():
        return None
    return torch.load(opt_file, map_location=device, weights_only=True)


def trainable_names(model: Any) -> list[str]:
    """Names of the trained parameters, in the order the optimizer holds them."""
    return [n for n, p in model.named_parameters() if p.requires_grad]


def named_optimizer_state(state: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """torch's position-keyed `optimizer.state_dict()` -> the same keyed by parameter name."""
    if _is_named(state):
        return state
    return {"state": {names[i]: v for i, v in state["state"].items()},
            "param_groups": [{**g, "params": [names[i] for i in g["params"]]} for g in state["param_groups"]]}


def positional_optimizer_state(state: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """A name-keyed optimizer state -> what `optimizer.load_state_dict` takes (positions)."""
    if not _is_named(state):
        return state
    index = {n: i for i, n in enumerate(names)}
    unknown = [n for n in state["state"] if n not in index]
    if unknown:
        raise ModelLoadError(f"The optimizer state names parameters this model does not train: {unknown[:3]}. "
                             "Resume with the model and LoRA settings the checkpoint was written with.")
    return {"state": {index[n]: v for n, v in state["state"].items()},
            "param_groups": [{**g, "params": [index[n] for n in g["params"]]} for g in state["param_groups"]]}


def _is_named(state: dict[str, Any]) -> bool:
    return any(isinstance(k, str) for k in state.get("state", {})) or any(
        isinstance(p, str) for g in state.get("param_groups", []) for p in g.get("params", []))


def _flatten(rng_state: tuple) -> list:
    version, internal, gauss = rng_state
    return [version, list(internal), gauss]


def _unflatten(data: list) -> tuple:
    version, internal, gauss = data
    return (version, tuple(internal), gauss)
