"""`vibe-rl run`'s server venv for a project that asks for vLLM, built for real with uv (the vLLM tier:
bash scripts/test-vllm.sh; a cold uv cache downloads vLLM, ~2.5 GB on CPU)."""

from __future__ import annotations

import importlib.util
import subprocess

import pytest

pytestmark = [pytest.mark.vllm, pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None,
    reason="vLLM is not installed here (it pins its own torch and transformers): run bash scripts/test-vllm.sh")]


def test_the_server_venv_of_a_vllm_project_imports_vllm_and_vibe_rl(tmp_path):
    from vibe_rl.autopilot.venvs import CPU_VLLM_LEFTOVERS, ensure_venv

    venv = ensure_venv(tmp_path, "server", vllm=True, log=lambda line: None)
    assert venv.created
    code = ("import importlib.util as u, torch, vllm, vibe_rl.engine.vllm_engine; "
            f"print(torch.__version__, [m for m in {CPU_VLLM_LEFTOVERS!r} if u.find_spec(m)])")
    res = subprocess.run([str(venv.python), "-c", code], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    version, leftovers = res.stdout.strip().splitlines()[-1].split(" ", 1)
    assert version.startswith("2.13.0") and leftovers == "[]"  # the pinned CPU torch; no CUDA extras
    assert not ensure_venv(tmp_path, "server", vllm=True, log=lambda line: None).created  # reused
