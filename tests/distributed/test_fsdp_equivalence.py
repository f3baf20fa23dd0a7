"""Sharded training (FSDP2 over 2 gloo processes, the server's own engine) gives the same losses
and weights as single-process training, and checkpoints move between 2 ranks and 1 process.

Tolerance: `batches.TOLERANCE` (relative 1e-5) on every loss; every weight after two AdamW steps
within 1% of the learning rate (one step moves a weight by up to lr; Adam divides by sqrt(v), so
the rounding of near-zero gradients shows up in the weights more than in the losses). fp32 on
CPU: the only difference is the order of float additions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.distributed.batches import LR, SCENARIOS, TOLERANCE, batch, configs, poisoned_batch, poisoned_model
from tests.helpers.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


def single_process(model_path: str, scenario: str, ckpt: Path | None = None, resume: Path | None = None):
    """Two steps (or one after `resume`) with today's single-process TorchEngine."""
    from vibe_rl.engine import load_engine

    engine_cfg, train_cfg = configs(model_path, scenario)
    with load_engine(engine_cfg, train_cfg) as engine:
        if resume is not None:
            engine.load(resume)
            return [engine.train(batch(2))["loss"]], None
        first = engine.train(batch(1))
        if ckpt is not None:
            engine.save(ckpt)
        second = engine.train(batch(2))
        weights = {n: p.detach().clone() for n, p in engine.model.named_parameters()
                   if "lora_" in n or not engine.lora}
        return [first["loss"], second["loss"]], weights


@pytest.fixture(scope="module")
def ranks(tmp_path_factory, tiny_model_dir):
    """One torchrun job (2 ranks) running every scenario; returns (result, out dir, single checkpoint)."""
    out = tmp_path_factory.mktemp("ranks")
    single_ckpt = out / "single-step1"
    single_process(str(tiny_model_dir), "full", ckpt=single_ckpt)
    poisoned = poisoned_model(tiny_model_dir, out / "poisoned-model")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", f"--master-port={free_port()}",
           str(ROOT / "tests/distributed/ranks_script.py"), str(tiny_model_dir), str(out),
           "--from-single", str(single_ckpt), "--poisoned", poisoned]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return json.loads((out / "result.json").read_text()), out


def close(a: float, b: float) -> bool:
    return abs(a - b) <= TOLERANCE * max(abs(a), abs(b), 1e-8)


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_sharded_losses_and_weights_match_single_process(ranks, tiny_model_dir, scenario):
    import torch

    result, out = ranks
    got = result[scenario]
    assert result["world_size"] == 2 and [d["rank"] for d in got["devices"]] == [0, 1]
    assert got["versions"] == [1.0, 2.0]
    losses, weights = single_process(str(tiny_model_dir), scenario)
    assert all(close(a, b) for a, b in zip(got["losses"], losses, strict=True)), (got["losses"], losses)
    assert losses[0] != losses[1]  # step 2 sees the updated weights: equal losses mean equal updates
    sharded = torch.load(out / f"{scenario}-weights.pt", weights_only=True)
    assert sharded.keys() == weights.keys() and weights
    worst = max(float((sharded[k] - weights[k]).abs().max()) for k in weights)
    assert worst <= 0.01 * LR, worst


def test_checkpoint_written_on_two_ranks_resumes_in_one_process(ranks, tiny_model_dir):
    from vibe_rl.engine import load_engine

    result, out = ranks
    ckpt = out / "full-step1"
    assert (ckpt / "model" / "config.json").is_file() and (ckpt / "optimizer.pt").is_file()
    assert json.loads((ckpt / "state.json").read_text())["world_size"] == 2
    resumed, _ = single_process(str(tiny_model_dir), "full", resume=ckpt)
    assert close(resumed[0], result["full"]["losses"][1]), (resumed, result["full"]["losses"])
    # the full-weight checkpoint is a plain HF directory: it loads as a model on its own
    engine_cfg, train_cfg = configs(str(ckpt / "model"), "full")
    with load_engine(engine_cfg, train_cfg, trainable=False) as engine:
        assert engine.generate([5, 6, 7]).token_ids


def test_lora_checkpoint_from_two_ranks_holds_the_adapter(ranks):
    _, out = ranks
    assert (out / "lora-step1" / "adapter" / "adapter_model.safetensors").is_file()
    assert not (out / "lora-step1" / "model").exists()


def test_checkpoint_written_by_one_process_resumes_on_two_ranks(ranks, tiny_model_dir):
    result, out = ranks
    single_step2 = single_process(str(tiny_model_dir), "full")[0][1]
    assert result["from_single"]["version"] == 2.0
    assert close(result["from_single"]["loss"], single_step2), (result["from_single"], single_step2)


def test_non_finite_logits_on_one_rank_skip_the_step_on_every_rank(ranks):
    """Only the rank holding the poisoned sample sees NaN logits; every rank skips the step together
    (a rank that stopped alone would leave the others waiting in a collective), as one process would."""
    from vibe_rl.engine import load_engine

    result, out = ranks
    got = result["poisoned"]
    assert got["skipped"] == 1.0 and got["version_after"] == 0.0
    engine_cfg, train_cfg = configs(str(out / "poisoned-model"), "full")
    with load_engine(engine_cfg, train_cfg) as engine:
        assert engine.train(poisoned_batch())["nan_skipped"] == 1.0
        clean = engine.train(batch(2))
    assert got["clean_version"] == clean["version"] == 1.0
    assert close(got["clean_loss"], clean["loss"]), (got, clean["loss"])
