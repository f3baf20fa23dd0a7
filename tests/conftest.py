"""Shared fixtures. `tiny_model_dir` builds (or reuses) the offline tiny model once per session."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    """The cached tiny HF model directory (tokenizer + chat template + random Qwen2, < 5M params)."""
    pytest.importorskip("torch", reason="the tiny model needs the 'train' extra (torch)")
    from vibe_rl.engine.tiny import ensure_tiny_model

    return ensure_tiny_model()
