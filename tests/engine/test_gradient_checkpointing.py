"""train.gradient_checkpointing on the single-process engine: same loss and update, recomputed activations."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from vibe_rl.engine import load_engine  # noqa: E402
from vibe_rl.rl.samples import Sample  # noqa: E402
from vibe_rl.schema import EngineConfig, TrainConfig  # noqa: E402


def one_update(tiny_model_dir, checkpointing: bool):
    eng = load_engine(EngineConfig(path=str(tiny_model_dir), device="cpu", max_model_len=256, generator="simple"),
                      TrainConfig(lr=1e-2, gradient_checkpointing=checkpointing))
    try:
        ids = list(range(300, 340))
        samples = [Sample(input_ids=ids, loss_mask=[0] * 30 + [1] * 10, old_logprobs=[-3.0] * 40, advantage=a)
                   for a in (1.0, -1.0)]
        metrics = eng.train(samples)
        layer = eng.model.model.layers[0]
        weights = {n: p.detach().clone() for n, p in eng.model.named_parameters()}
        return metrics, weights, layer.gradient_checkpointing
    finally:
        eng.close()


def test_checkpointing_is_on_and_changes_nothing_but_memory(tiny_model_dir):
    plain, plain_w, plain_on = one_update(tiny_model_dir, False)
    ckpt, ckpt_w, ckpt_on = one_update(tiny_model_dir, True)
    assert not plain_on and ckpt_on
    assert ckpt["loss"] == pytest.approx(plain["loss"], rel=1e-5, abs=1e-7)
    assert ckpt["grad_norm"] == pytest.approx(plain["grad_norm"], rel=1e-4)
    for name, w in plain_w.items():
        torch.testing.assert_close(ckpt_w[name], w, rtol=1e-5, atol=1e-6)
