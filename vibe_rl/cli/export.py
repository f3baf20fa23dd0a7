"""`vibe-rl export CHECKPOINT OUT [--merge-lora]`: a checkpoint as a servable Hugging Face model directory.

A full-weights checkpoint (`model/`) is copied as it is (weights, config, tokenizer). A LoRA checkpoint
(`adapter/`) is merged into its base model with peft (`merge_and_unload`) when `--merge-lora` is given,
and saved with the base model's tokenizer; the result loads with `AutoModelForCausalLM.from_pretrained(OUT)`
and serves like any model (vLLM, transformers, `model.path` of a new job). The directory is written next
to OUT and renamed into place, so a failed export never leaves half a model under OUT.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import typer

from vibe_rl.errors import ConfigError, ModelLoadError


def _check_out(checkpoint: Path, out: Path, force: bool) -> None:
    """OUT must be a new or empty folder, or (with --force) an earlier export: never `/`, a file, a folder that
    holds the checkpoint or lies inside it, nor a folder of other files (--force would delete them)."""
    from vibe_rl.scaffold.outdir import check_target

    check_target(out, "OUT", force=True, nested_ok=True)  # a file, a path under a file, /, home
    ckpt, target = checkpoint.resolve(), out.resolve()
    if target == ckpt or target in ckpt.parents or ckpt in target.parents:
        raise ConfigError(f"OUT {out} {'holds' if target in ckpt.parents or target == ckpt else 'is inside'} the "
                          f"checkpoint {checkpoint}: pick a folder outside it, e.g. {ckpt.parent.parent / 'exported'}.")
    if out.is_dir() and any(out.iterdir()):
        if not force:
            raise ConfigError(f"{out} is not empty. Pick a new directory or pass --force to replace it.")
        if not (out / "config.json").is_file():
            raise ConfigError(f"OUT {out} is not empty and is not a model folder (no config.json): --force replaces "
                              "only an earlier export. Pick a new folder, or empty this one yourself.")


def _read_state(checkpoint: Path) -> dict:
    state_file = checkpoint / "state.json"
    if not state_file.is_file():
        raise ModelLoadError(f"{checkpoint} is not a vibe-rl checkpoint (no state.json). Pass a directory such as "
                             "<experiment>/checkpoints/step_000005.")
    try:
        state = json.loads(state_file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelLoadError(f"{state_file} is damaged ({exc}): export another step of "
                             f"{checkpoint.resolve().parent}.") from None
    if not isinstance(state, dict):
        raise ModelLoadError(f"{state_file} is damaged (a JSON {type(state).__name__}, not an object): export "
                             f"another step of {checkpoint.resolve().parent}.")
    weights = checkpoint / ("adapter" if state.get("lora") else "model")
    if not weights.is_dir():
        raise ModelLoadError(f"{checkpoint} has no {weights.name}/ folder (state.json says it holds "
                             f"{'a LoRA adapter' if state.get('lora') else 'full weights'}): the checkpoint is "
                             f"incomplete; export another step of {checkpoint.resolve().parent}.")
    return state


class CheckpointLinkError(ConfigError):
    """A checkpoint holds symbolic links: export copies files, never what a link points at."""


def _refuse_links(folder: Path) -> None:
    """Refuse `folder` if it or anything inside it is a symbolic link: copying would follow it and put the file
    it points at (any file this user can read) into the exported model."""
    links = [folder] if folder.is_symlink() else []
    for root, dirs, files in os.walk(folder, followlinks=False):
        links += [Path(root) / n for n in dirs + files if (Path(root) / n).is_symlink()]
    if links:
        shown = ", ".join(str(p) for p in links[:5]) + (f" and {len(links) - 5} more" if len(links) > 5 else "")
        raise CheckpointLinkError(f"{folder} holds {len(links)} symbolic link(s) ({shown}); vibe-rl export copies no "
                                  "link. Replace each link with the file itself (cp --remove-destination TARGET "
                                  "LINK) if you trust it, or export another checkpoint.")


def export_checkpoint(checkpoint: Path, out: Path, merge_lora: bool = False, base: str | None = None,
                      force: bool = False) -> Path:
    """Write `checkpoint` (a directory engine.save() wrote) to `out` as an HF model directory; returns `out`."""
    state = _read_state(checkpoint)
    _check_out(checkpoint, out, force)
    if state.get("lora"):
        if not merge_lora:
            raise ConfigError(f"{checkpoint} holds a LoRA adapter, not full weights. Pass --merge-lora to merge "
                              "it into its base model (a servable directory), or serve the base model with "
                              f"the adapter in {checkpoint / 'adapter'} yourself.")
        if not (base or state.get("base_model")):
            raise ModelLoadError(f"{checkpoint / 'state.json'} does not name the base model of its LoRA adapter: "
                                 "pass it with --base PATH.")
    _refuse_links(checkpoint / ("adapter" if state.get("lora") else "model"))
    tmp = out.parent / f".{out.name}.export-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        if state.get("lora"):
            _merge(checkpoint / "adapter", base or state["base_model"], tmp)
        else:
            shutil.copytree(checkpoint / "model", tmp, symlinks=True)  # none left: checked above
        if out.exists():
            shutil.rmtree(out)
        os.rename(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _merge(adapter: Path, base: str, into: Path) -> None:
    from vibe_rl.engine.checkpoint import merge_adapter
    from vibe_rl.engine.loader import resolve_model_path

    try:
        base_path = resolve_model_path(base)
    except ModelLoadError as exc:
        raise ModelLoadError(f"{exc} (the checkpoint's base model; pass --base PATH if it moved)") from None
    merge_adapter(adapter, base_path, into)


def register(app: typer.Typer) -> None:
    @app.command("export")
    def export(
        checkpoint: Path = typer.Argument(..., help=(
            "A checkpoint directory, e.g. <experiment>/checkpoints/step_000005.")),
        out: Path = typer.Argument(..., help="Where to write the Hugging Face model directory."),
        merge_lora: bool = typer.Option(False, "--merge-lora", help="Merge a LoRA adapter into its base model."),
        base: str = typer.Option(None, "--base", help="Base model of a LoRA checkpoint, if it moved since training."),
        force: bool = typer.Option(False, "--force", help="Replace OUT if it is not empty."),
    ) -> None:
        """Write a checkpoint as a servable Hugging Face model directory (weights, config, tokenizer):
        full weights are copied, a LoRA adapter is merged into its base model with --merge-lora."""
        done = export_checkpoint(checkpoint, out, merge_lora=merge_lora, base=base, force=force)
        typer.echo(f"Exported {checkpoint} to {done}; load it with AutoModelForCausalLM.from_pretrained('{done}').")
