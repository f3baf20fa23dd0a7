from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    """A trainable torch engine on the tiny model (CPU, fp32); shared within a test module."""
    from vibe_rl.engine import load_engine
    from vibe_rl.schema import EngineConfig, TrainConfig

    eng = load_engine(EngineConfig(path=str(tiny_model_dir), device="cpu", max_model_len=256),
                      TrainConfig(lr=1e-3))
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def chat_prompt(engine):
    tok = engine.tokenizer
    text = tok.apply_chat_template([{"role": "user", "content": "Describe the word apple."}],
                                   add_generation_prompt=True, tokenize=False)
    return tok.encode(text)
