"""Every rank's generation replica answers a seeded request like rank 0's (same tokens, logprobs
within float rounding), before and after an update, and the sharded trainer scores the replicas'
answers with the logprobs they reported (an on-policy step has a gap near 0).

On CPU (gloo ranks, GPUs hidden) and on 2 GPUs, where rank 1 runs on cuda:1 in a process that sees
both GPUs: the layout of a one-node server, the one whose losses differed from two nodes x 1 GPU
(tests/distributed/test_server_ranks.py). fp32 on both, so the tolerance is float rounding (1e-3
on a logprob: a replica with other weights or a wrong device is off by far more).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
GAP = 1e-3


def _cuda_pair() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available() and torch.cuda.device_count() >= 2


def run_replicas(tmp_path, tiny_model_dir, device: str, visible: str) -> dict:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", f"--master-port={free_port()}",
           str(ROOT / "tests/distributed/replica_script.py"), str(tiny_model_dir), str(tmp_path), device]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": visible, "NCCL_NVLS_ENABLE": "0"}
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return json.loads((tmp_path / "replicas.json").read_text())


def check(result: dict) -> None:
    for phase in ("before", "after"):
        got = result[phase]
        assert got["same_tokens"] == got["requests"], (phase, result)
        assert got["max_logprob_gap"] <= GAP, (phase, result)
    assert result["train"]["nan_skipped"] == 0 and result["train"]["logprob_abs_diff"] <= GAP, result


@pytest.mark.slow
def test_replicas_on_cpu_ranks_answer_alike_and_on_policy(tmp_path, tiny_model_dir):
    result = run_replicas(tmp_path, tiny_model_dir, "cpu", "")
    assert [d["device"] for d in result["devices"]] == ["cpu", "cpu"]
    check(result)


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_pair(), reason="needs 2 CUDA GPUs")
def test_replicas_on_two_gpus_answer_alike_and_on_policy(tmp_path, tiny_model_dir):
    result = run_replicas(tmp_path, tiny_model_dir, "auto", "0,1")
    assert [d["device"] for d in result["devices"]] == ["cuda:0", "cuda:1"]
    check(result)
