from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("torch")


def test_vibe_rl_model_tiny_writes_a_loadable_dir(tmp_path: Path):
    exe = shutil.which("vibe-rl") or str(Path(__file__).resolve().parents[2] / ".venv" / "bin" / "vibe-rl")
    out = subprocess.run([exe, "model", "tiny", str(tmp_path / "m")], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    n = int(re.search(r"(\d+) exactly", out.stdout).group(1))
    assert 100_000 < n <= 5_000_000
    from vibe_rl.engine import SamplingParams, load_engine
    from vibe_rl.schema import EngineConfig

    engine = load_engine(EngineConfig(path=str(tmp_path / "m"), device="cpu"), trainable=False)
    try:
        assert sum(p.numel() for p in engine.model.parameters()) == n
        assert len(engine.generate(engine.tokenizer.encode("hi"), SamplingParams(max_tokens=2, seed=0)).token_ids) <= 2
    finally:
        engine.close()
    again = subprocess.run([exe, "model", "tiny", str(tmp_path / "m")], capture_output=True, text=True, timeout=120)
    assert again.returncode != 0 and "--force" in again.stderr
