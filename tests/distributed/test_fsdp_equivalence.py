"""Sharded training (FSDP2 over 2 gloo processes, the server's own engine) gives the same losses
and weights as single-process training, and checkpoints move between 2 ranks and 1 process.
Gradients are reduce-scattered once per step by default ("step" sync), after every micro-batch
with VIBE_RL_GRAD_SYNC=micro_batch; both give the single-process losses.

Tolerance: `batches.TOLERANCE` (relative 1e-5) on every loss; every weight after two AdamW steps
within 1% of the learning rate (one step moves a weight by up to lr; Adam divides by sqrt(v), so
the rounding of near-zero gradients shows up in the weights more than in the losses). fp32 on
CPU: the only difference is the order of float additions."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.distributed.batches import (
    LR,
    MAX_LEN,
    MICRO_BATCH,
    SCENARIOS,
    TOLERANCE,
    batch,
    configs,
    nan_loss_batch,
    poisoned_batch,
    poisoned_model,
)
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
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "VIBE_RL_GRAD_SYNC": "auto"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return json.loads((out / "result.json").read_text()), out


@pytest.fixture(scope="module")
def micro_batch_ranks(tmp_path_factory, tiny_model_dir):
    """The "full" scenario on 2 ranks that reduce-scatter gradients after every micro-batch."""
    out = tmp_path_factory.mktemp("ranks-micro-batch")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", f"--master-port={free_port()}",
           str(ROOT / "tests/distributed/ranks_script.py"), str(tiny_model_dir), str(out), "--only", "full"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "VIBE_RL_GRAD_SYNC": "micro_batch"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return json.loads((out / "result.json").read_text())["full"]


def micro_batches_per_rank(samples: list) -> int:
    """How many forward/backward passes each of 2 ranks runs on `samples` (the same on every rank)."""
    from vibe_rl.engine.sharding import split_batch

    _, train_cfg = configs("tiny", "full")
    split = split_batch(samples, 2, MAX_LEN, train_cfg.max_samples, False, 0, MICRO_BATCH)
    assert split.passes == math.ceil(max(sum(s.advantage != 0.0 for s in shard) for shard in split.shards) / MICRO_BATCH)
    return split.passes


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


def test_gradients_are_reduced_once_per_step(ranks):
    """Default ("auto" on CPU -> "step"): one reduce-scatter per FSDP group per step, however many
    micro-batches the step runs (counted at torch.distributed.reduce_scatter_single on rank 0)."""
    result, _ = ranks
    for step, sync in zip((1, 2), result["full"]["sync"], strict=True):
        assert micro_batches_per_rank(batch(step)) >= 2  # else once per step and per micro-batch look alike
        assert sync["mode"] == "step" and sync["synced_backwards"] == 1, sync
        assert sync["reduce_scatters"] == sync["fsdp_groups"] == 5, sync  # 4 decoder layers + the root


def test_reducing_every_micro_batch_gives_the_same_losses(micro_batch_ranks, ranks, tiny_model_dir):
    losses, _ = single_process(str(tiny_model_dir), "full")
    assert all(close(a, b) for a, b in zip(micro_batch_ranks["losses"], losses, strict=True))
    assert all(close(a, b) for a, b in zip(micro_batch_ranks["grad_norms"], ranks[0]["full"]["grad_norms"],
                                           strict=True))
    for step, sync in zip((1, 2), micro_batch_ranks["sync"], strict=True):
        n = micro_batches_per_rank(batch(step))
        assert sync["mode"] == "micro_batch" and sync["synced_backwards"] == n, sync
        assert sync["reduce_scatters"] == n * sync["fsdp_groups"], sync


def test_non_finite_loss_on_one_rank_skips_the_step_on_every_rank(ranks, tiny_model_dir):
    """Rank 0's last micro-batch has a NaN loss (finite logits); rank 1's are all finite. Every rank
    skips (none waits in a collective), nothing reduced, and the gradients rank 0 accumulated before
    the NaN are dropped: the next two steps give the losses of a fresh run."""
    from vibe_rl.engine import load_engine

    result, _ = ranks
    got = result["nan_loss"]
    assert got["skipped"] == 1.0 and got["version_after"] == 0.0
    assert got["sync"]["reduce_scatters"] == 0 and got["sync"]["synced_backwards"] == 0, got
    assert all(close(a, b) for a, b in zip(got["clean_losses"], result["full"]["losses"], strict=True)), got
    engine_cfg, train_cfg = configs(str(tiny_model_dir), "full")
    with load_engine(engine_cfg, train_cfg) as engine:  # one process skips that batch too
        assert engine.train(nan_loss_batch())["nan_skipped"] == 1.0
