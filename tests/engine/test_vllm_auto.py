"""`model.engine: auto` on an architecture the paged engine does not drive (a random Phi-3 of the tiny model's
size): vLLM serves it, with the torch engine's logprobs, and it trains to a first update (the vLLM tier:
bash scripts/test-vllm.sh)."""

from __future__ import annotations

import importlib.util

import pytest

pytestmark = [pytest.mark.vllm, pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None,
    reason="vLLM is not installed here (it pins its own torch and transformers): run bash scripts/test-vllm.sh")]


def test_auto_serves_a_phi3_with_vllm_and_trains_it_to_a_first_update(tmp_path):
    from vibe_rl.engine import load_engine
    from vibe_rl.engine.base import SamplingParams
    from vibe_rl.engine.choice import choose_engine
    from vibe_rl.engine.shapes import build_random_model
    from vibe_rl.rl.samples import Sample
    from vibe_rl.schema import EngineConfig, TrainConfig

    build_random_model("tiny", tmp_path, vocab="tokenizer", dtype="float32", arch="phi3")
    config = EngineConfig(path=str(tmp_path), engine="auto", device="cpu", max_model_len=512)
    choice = choose_engine(config)
    assert choice.engine == "vllm" and "Phi3ForCausalLM" in choice.reason
    train = TrainConfig(lr=1e-3)
    v = load_engine(config, train)
    t = load_engine(config.model_copy(update={"engine": "torch"}), train)
    try:
        assert type(v).__name__ == "VLLMEngine" and type(t).__name__ == "TorchEngine"
        prompt = v.tokenizer.encode("Describe the word apple.")
        greedy = SamplingParams(temperature=0, max_tokens=10)

        def parity() -> float:
            a, b = v.generate(prompt, greedy), t.generate(prompt, greedy)
            assert a.token_ids == b.token_ids
            return max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True))

        assert parity() < 1e-4
        gen = v.generate(prompt, SamplingParams(temperature=1.0, max_tokens=8, seed=3))
        samples = [Sample(input_ids=prompt + gen.token_ids, loss_mask=[0] * len(prompt) + [1] * len(gen.token_ids),
                          old_logprobs=[0.0] * len(prompt) + gen.logprobs, advantage=a) for a in (1.0, -0.5)]
        v.train(samples), t.train(samples)
        assert v.version == 1 and v.stats["failed_syncs"] == 0
        worst = parity()
        print(f"phi3 after one update: max |logprob diff| vllm vs torch {worst:.3g}")
        assert worst < 1e-4
    finally:
        v.close()
        t.close()
