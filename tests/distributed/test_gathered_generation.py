"""A multi-rank server without generation replicas (`model.generation_replicas: off`, what `auto`
picks when a full copy per GPU does not fit beside the training shards): rank 0 generates with the
sharded training model, every rank joining each pass. On 2 gloo ranks (fp32, CPU) it must answer
seeded requests as a single-process engine does, train on-policy (the trainer's logprobs equal the
rollout's), generate from the updated weights, and write a checkpoint a single process resumes
from with the same weights. Tolerances: logprobs 1e-4 (float rounding of gathered vs local
weights), weights 1e-6 (gathered tensors are exact copies)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.distributed.gathered_script import PROMPTS, SCENARIOS, configs, play, samples
from tests.helpers.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


def run_ranks(out: Path, model_dir, device: str) -> dict:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", f"--master-port={free_port()}",
           str(ROOT / "tests/distributed/gathered_script.py"), str(model_dir), str(out), device]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""} if device == "cpu" else dict(os.environ)
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return {name: json.loads((out / f"{name}.json").read_text()) for name in SCENARIOS}


@pytest.fixture(scope="module")
def gathered(tmp_path_factory, tiny_model_dir):
    out = tmp_path_factory.mktemp("gathered")
    return run_ranks(out, tiny_model_dir, "cpu"), out


def single_process(model_path: str, lora_rank: int, device: str = "cpu"):
    from vibe_rl.engine import load_engine

    engine_cfg, train_cfg = configs(model_path, lora_rank, replicas="on", device=device)
    with load_engine(engine_cfg, train_cfg) as engine:
        before = play(engine)
        metrics = engine.train(samples(before))
        return before, play(engine), metrics


def same_answers(got: list[dict], want: list[dict], tolerance: float = 1e-4) -> None:
    assert [a["tokens"] for a in got] == [a["tokens"] for a in want]
    gap = max(abs(p - q) for a, b in zip(got, want, strict=True) for p, q in zip(a["logprobs"], b["logprobs"],
                                                                                strict=True))
    assert gap < tolerance, gap


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_without_replicas_rank_0_generates_and_trains_like_one_process(gathered, tiny_model_dir, scenario):
    results, _ = gathered
    got = results[scenario]
    assert got["gathered"] is True and got["remotes"] == 0  # no copy anywhere: every request on rank 0
    before, after, metrics = single_process(str(tiny_model_dir), SCENARIOS[scenario])
    same_answers(got["before"], before)
    assert got["logprob_abs_diff"] < 1e-4 and abs(got["ratio_mean"] - 1) < 1e-4  # on-policy
    assert got["loss"] == pytest.approx(metrics["loss"], rel=1e-5)
    assert all(a["version"] == 0 for a in got["before"]) and all(a["version"] == 1 for a in got["after"])
    same_answers(got["after"], after)  # generated from the updated shards
    assert [a["tokens"] for a in got["after"]] != [a["tokens"] for a in got["before"]] or scenario == "lora"


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_a_checkpoint_from_the_gathered_shards_resumes_in_one_process(gathered, tiny_model_dir, scenario):
    from vibe_rl.engine import load_engine

    results, out = gathered
    ckpt = out / f"{scenario}-ckpt"
    if scenario == "full":  # a plain HF directory, named by the model's own class (not FSDP's wrapper)
        config = json.loads((ckpt / "model" / "config.json").read_text())
        assert not any(a.startswith("FSDP") for a in config.get("architectures", [])), config
    engine_cfg, train_cfg = configs(str(tiny_model_dir), SCENARIOS[scenario], replicas="on")
    with load_engine(engine_cfg, train_cfg) as engine:
        engine.load(ckpt)
        assert engine.version == 1
        same_answers(play(engine), results[scenario]["after"])


def test_prompts_are_distinct():  # the batch must hold different requests for the comparison to mean much
    assert len({tuple(p) for p in PROMPTS}) == len(PROMPTS)


def _cuda_pair() -> bool:
    import torch

    return torch.cuda.is_available() and torch.cuda.device_count() >= 2


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_pair(), reason="needs 2 CUDA GPUs; the CPU tests above run the same checks on gloo")
def test_without_replicas_on_two_gpus_answers_and_trains_like_one_gpu(tmp_path, tiny_model_dir):
    """The same scenarios over NCCL, one GPU per rank, fp32: rank 0 generates with the sharded model and
    matches a single-process engine on one GPU (1e-3: other GPU kernels per batch shape may round differently)."""
    assert os.environ.get("NCCL_NVLS_ENABLE") == "0", "source .device/on-device.sh first (NCCL_NVLS_ENABLE=0)"
    results = run_ranks(tmp_path, tiny_model_dir, "cuda")
    for scenario, rank in SCENARIOS.items():
        got = results[scenario]
        assert got["gathered"] is True and got["remotes"] == 0
        before, after, metrics = single_process(str(tiny_model_dir), rank, device="cuda")
        same_answers(got["before"], before, 1e-3)
        assert got["logprob_abs_diff"] < 1e-3 and abs(got["ratio_mean"] - 1) < 1e-3
        assert got["loss"] == pytest.approx(metrics["loss"], rel=1e-3, abs=1e-5)
        same_answers(got["after"], after, 1e-3)
