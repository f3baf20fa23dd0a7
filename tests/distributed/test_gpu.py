"""GPU runs of the multi-GPU path (skipped without 2 CUDA GPUs). The 2-GPU server test lives in
test_server_ranks.py; this one is the 14B-shaped full fine-tune, which does not fit one 80 GB GPU
(16 bytes a parameter with fp32 AdamW; 8 with bf16 params, grads and AdamW moments = 118 GB)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _gpus() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.gpu
@pytest.mark.skipif(_gpus() < 2, reason="needs 2 CUDA GPUs")
def test_14b_shape_full_fine_tune_on_two_gpus():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks/multi_gpu.py"), "--shape", "14b", "--gpus", "2",
                           "--steps", "2", "--samples", "16"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    run = report["runs"][0]
    assert "error" not in run, run.get("error")
    assert run["applied"] and math.isfinite(run["loss"]), run
    assert all(gb < 140 for gb in run["peak_gb_per_gpu"]), run
    print(json.dumps(report))
