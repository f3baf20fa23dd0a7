"""Model backends behind one small protocol (`vibe_rl.engine.base.Engine`).

Importing this package is light: backends (and torch) are imported by
`load_engine` when one is asked for.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from vibe_rl.engine.base import Engine, Generation, SamplingParams
from vibe_rl.errors import ConfigError
from vibe_rl.extras import require

if TYPE_CHECKING:
    from vibe_rl.schema import EngineConfig, TrainConfig

__all__ = ["Engine", "Generation", "SamplingParams", "load_engine", "ensure_tiny_model"]


def ensure_tiny_model(cache_dir: str | Path | None = None) -> Path:
    """The cached offline tiny model directory (see vibe_rl.engine.tiny); built on first use."""
    from vibe_rl.engine.tiny import ensure_tiny_model as _ensure

    return _ensure(cache_dir)


def load_engine(model: EngineConfig, train: TrainConfig | None = None, trainable: bool = True) -> Engine:
    """Build the engine `model.engine` names: 'torch', 'vllm', or 'auto' (see vibe_rl.engine.choice)."""
    from vibe_rl.engine.choice import choose_engine

    name = choose_engine(model).engine
    if name == "torch":
        from vibe_rl.engine import distributed

        if trainable and distributed.current() is not None and distributed.current().world_size > 1:
            from vibe_rl.engine.dist_engine import DistributedEngine  # one process per GPU (FSDP2)
            from vibe_rl.schema import TrainConfig

            return DistributedEngine(model, train or TrainConfig(), distributed.current())
        from vibe_rl.engine.torch_engine import TorchEngine

        return TorchEngine(model, train, trainable=trainable)
    if name == "vllm":
        from vibe_rl.engine.vllm_engine import VLLMEngine

        return VLLMEngine(model, train, trainable=trainable)
    if name == "verl":
        require(name, f"the '{name}' engine")  # raises MissingExtraError naming the extra when absent
        raise ConfigError(
            "model.engine 'verl' is not wired into the embedded swarm server of this release. Use model.engine: "
            "torch or vllm, or run verl yourself and register it as a static model."
        )
    raise ConfigError(f"Unknown model.engine '{name}'. Choose one of: torch, vllm, auto.")
