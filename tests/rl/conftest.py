from __future__ import annotations

import pytest


@pytest.fixture
def make_engine(tiny_model_dir):
    """Factory for fresh trainable engines on the tiny model (closed after the test)."""
    from vibe_rl.engine import load_engine
    from vibe_rl.schema import EngineConfig, LoraConfig, TrainConfig

    built = []

    def make(lr: float = 1e-3, lora_rank: int = 0, max_model_len: int = 256, **train):
        eng = load_engine(
            EngineConfig(path=str(tiny_model_dir), device="cpu", max_model_len=max_model_len, seed=0,
                         lora=LoraConfig(rank=lora_rank, alpha=2 * lora_rank or 32)),
            TrainConfig(lr=lr, **train))
        built.append(eng)
        return eng

    yield make
    for eng in built:
        eng.close()


@pytest.fixture
def rollout():
    """The GRPO rollout helper below, as a fixture (tests import nothing from conftest)."""
    return _rollout


def _rollout(engine, prompts, n, max_tokens, reward_fn, step=0, temperature=1.0, top_p=1.0):
    """GRPO rollout through the engine: n episodes per prompt -> (samples, rewards by episode)."""
    from vibe_rl.engine import SamplingParams
    from vibe_rl.rl.advantages import assign_advantages
    from vibe_rl.rl.samples import Turn, build_samples

    futures = [(k, j, engine.submit(p, SamplingParams(temperature=temperature, top_p=top_p, max_tokens=max_tokens)))
               for k, p in enumerate(prompts) for j in range(n)]
    samples, rewards = [], {}
    for k, j, fut in futures:
        gen = fut.result(timeout=120)
        episode = f"{step}-{k}-{j}"
        turn = Turn(prompts[k], gen.token_ids, gen.logprobs, weight_version=gen.weight_version,
                    temperature=temperature, top_p=top_p)
        samples += build_samples([turn], task_id=str(k), episode_id=episode)
        rewards[episode] = reward_fn(gen.token_ids)
    assign_advantages(samples, rewards)
    return samples, rewards
