"""Lazy imports of optional heavy dependencies, with an error naming the extra."""

from __future__ import annotations

import importlib
from types import ModuleType

from vibe_rl.errors import MissingExtraError

# module name -> the extra that installs it
EXTRA_OF = {
    "torch": "train",
    "transformers": "train",
    "peft": "train",
    "safetensors": "train",
    "tokenizers": "train",
    "uvicorn": "server",
    "libtmux": "autopilot",
    "anthropic": "llm",
    "vllm": "vllm",
    "verl": "verl",
    "ray": "verl",
    "tensorboard": "tensorboard",
    "wandb": "wandb",
    "swanlab": "swanlab",
    "matplotlib": "plot",
    "datasets": "data",
}


def require(module: str, purpose: str = "") -> ModuleType:
    """Import `module` or raise MissingExtraError naming the extra that provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        if exc.name not in (None, top, module):
            raise  # the package is there but one of *its* imports failed: show that
        raise MissingExtraError(top, EXTRA_OF.get(top, "train"), purpose) from exc
