"""Checkpoints: resuming gives the same next step as an uninterrupted run."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from vibe_rl.engine import SamplingParams, load_engine  # noqa: E402
from vibe_rl.errors import ModelLoadError  # noqa: E402
from vibe_rl.rl.advantages import assign_advantages  # noqa: E402
from vibe_rl.rl.samples import Turn, build_samples  # noqa: E402
from vibe_rl.schema import EngineConfig, LoraConfig, TrainConfig  # noqa: E402


def make(tiny_model_dir, rank):
    return load_engine(EngineConfig(path=str(tiny_model_dir), device="cpu", max_model_len=128, seed=0,
                                    lora=LoraConfig(rank=rank, alpha=8)), TrainConfig(lr=1e-2, micro_batch_size=3))


def batch(engine, seed):
    prompt = engine.tokenizer.encode("Describe the word apple to the other players.")
    samples, rewards = [], {}
    for j in range(6):
        gen = engine.generate(prompt, SamplingParams(max_tokens=8, seed=seed * 100 + j))
        samples += build_samples([Turn(prompt, gen.token_ids, gen.logprobs)], task_id="t", episode_id=str(j))
        rewards[str(j)] = engine.tokenizer.decode(gen.token_ids).count("e") + j % 2
    assign_advantages(samples, rewards)
    return samples


@pytest.mark.parametrize("rank", [0, 4], ids=["full", "lora"])
def test_resume_matches_uninterrupted(tiny_model_dir, tmp_path, rank):
    a = make(tiny_model_dir, rank)
    first, second = batch(a, 1), batch(a, 2)  # `second` goes stale after step 1, so its loss depends on weights
    a.train(first)
    a.train(first)  # two steps so the AdamW moments matter
    saved = a.save(tmp_path / "ckpt")
    expected = a.train(second)
    after_a = {k: v.clone() for k, v in a.model.state_dict().items()}
    a.close()

    b = make(tiny_model_dir, rank)
    b.load(saved)
    assert (b.step, b.version) == (2, 2)
    got = b.train(second)
    assert got["loss"] == pytest.approx(expected["loss"], abs=1e-6)
    assert got["grad_norm"] == pytest.approx(expected["grad_norm"], rel=1e-5)
    assert abs(expected["loss"]) > 1e-5  # the check is not vacuous
    after_b = b.model.state_dict()
    assert max(float((after_a[k] - after_b[k]).abs().max()) for k in after_a) < 1e-5
    b.close()

    # weights-only resume is not the same run: the optimizer state matters
    c = make(tiny_model_dir, rank)
    c.load(saved)
    c.optimizer.state.clear()
    c.train(second)
    assert max(float((after_a[k] - v).abs().max()) for k, v in c.model.state_dict().items()) > 1e-6
    c.close()


def test_full_checkpoint_is_a_loadable_hf_dir(tiny_model_dir, tmp_path):
    a = make(tiny_model_dir, 0)
    a.train(batch(a, 3))
    saved = a.save(tmp_path / "ckpt")
    a.close()
    assert (saved / "model" / "model.safetensors").is_file() and (saved / "optimizer.pt").is_file()
    b = load_engine(EngineConfig(path=str(saved / "model"), device="cpu"), trainable=False)
    prompt = b.tokenizer.encode("hello")
    assert b.generate(prompt, SamplingParams(max_tokens=3, seed=0)).token_ids
    b.close()
    lora = make(tiny_model_dir, 4)
    saved_lora = lora.save(tmp_path / "lora")
    assert (saved_lora / "adapter" / "adapter_model.safetensors").is_file()
    with pytest.raises(ModelLoadError, match="lora"):
        make(tiny_model_dir, 0).load(saved_lora)
    with pytest.raises(ModelLoadError, match="not a vibe-rl checkpoint"):
        lora.load(tmp_path)
    with pytest.raises(ModelLoadError, match="is a vibe-rl checkpoint"):
        load_engine(EngineConfig(path=str(saved_lora)))
    with pytest.raises(ModelLoadError, match="LoRA adapter only"):
        load_engine(EngineConfig(path=str(saved_lora / "adapter")))
    lora.close()


def test_saving_over_an_existing_checkpoint_replaces_it(tiny_model_dir, tmp_path):
    a = make(tiny_model_dir, 0)
    a.save(tmp_path / "ckpt")
    a.train(batch(a, 4))
    a.save(tmp_path / "ckpt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]
    b = make(tiny_model_dir, 0)
    b.load(tmp_path / "ckpt")
    assert b.version == 1
    a.close()
    b.close()
