"""GRPO through the engine on the tiny model (CPU, real torch)."""

from __future__ import annotations

import math
import statistics

import pytest

torch = pytest.importorskip("torch")

from vibe_rl.rl.samples import Sample  # noqa: E402


def chat_prompts(tok, n):
    return [tok.encode(tok.apply_chat_template([{"role": "user", "content": f"Write the letter e. Task {k}."}],
                                               add_generation_prompt=True, tokenize=False)) for k in range(n)]


def share_of_e(tok):
    def reward(ids):
        text = tok.decode(ids, skip_special_tokens=True)
        return text.count("e") / max(len(text), 1)
    return reward


def weights(engine):
    return {k: v.detach().clone() for k, v in engine.model.state_dict().items()}


def test_it_learns_a_toy_reward(make_engine, rollout):
    torch.manual_seed(0)
    engine = make_engine(lr=1e-2, micro_batch_size=16)
    tok = engine.tokenizer
    prompts, reward = chat_prompts(tok, 2), share_of_e(tok)
    history = []
    for step in range(30):
        samples, rewards = rollout(engine, prompts, n=8, max_tokens=12, reward_fn=reward, step=step)
        metrics = engine.train(samples)
        assert metrics["nan_skipped"] == 0
        assert abs(metrics["ratio_mean"] - 1) < 1e-3  # on-policy: train logprobs reproduce rollout logprobs
        history.append(statistics.mean(rewards.values()))
    first, last = statistics.mean(history[:5]), statistics.mean(history[-5:])
    assert last > first + 0.2, history
    assert engine.version == 30


@pytest.mark.parametrize("temperature,top_p", [(0.7, 1.0), (1.2, 0.85)])
def test_train_logprobs_equal_rollout_logprobs_at_the_rollout_weights(make_engine, rollout, temperature, top_p):
    engine = make_engine(lr=1e-3)
    tok = engine.tokenizer
    samples, _ = rollout(engine, chat_prompts(tok, 2), n=4, max_tokens=10, reward_fn=share_of_e(tok),
                         temperature=temperature, top_p=top_p)
    for s in samples:
        s.advantage = 1.0  # every sample goes through the model
    metrics = engine.train(samples)
    assert metrics["logprob_abs_diff"] < 1e-4
    assert metrics["clip_frac"] == 0.0


def test_nan_loss_skips_the_step_and_is_counted(make_engine, rollout):
    engine = make_engine(lr=1e-2)
    tok = engine.tokenizer
    samples, _ = rollout(engine, chat_prompts(tok, 1), n=4, max_tokens=6, reward_fn=share_of_e(tok))
    for i, s in enumerate(samples):
        s.advantage = 1.0 if i % 2 else -1.0
    before = weights(engine)
    bad = [Sample(s.input_ids, s.loss_mask, [float("nan") if m else 0.0 for m in s.loss_mask], s.advantage)
           for s in samples]
    metrics = engine.train(bad)
    assert metrics["nan_skipped"] == 1 and metrics["nan_skipped_total"] == 1
    assert math.isnan(metrics["loss"])
    assert engine.version == 0 and engine.step == 0
    assert all(torch.equal(before[k], v) for k, v in weights(engine).items())
    good = engine.train(samples)  # the next healthy step runs normally
    assert good["nan_skipped"] == 0 and good["nan_skipped_total"] == 1 and engine.version == 1
    assert any(not torch.equal(before[k], v) for k, v in weights(engine).items())


def test_too_long_samples_are_truncated_and_counted(make_engine, rollout):
    engine = make_engine(lr=1e-3, max_model_len=32)
    ids = list(range(10, 50))  # 40 tokens, the last 20 written by the model
    long = Sample(ids, [0] * 20 + [1] * 20, [0.0] * 20 + [-3.0] * 20, advantage=1.0)
    short = Sample(ids[:12], [0] * 6 + [1] * 6, [0.0] * 6 + [-3.0] * 6, advantage=-1.0)
    metrics = engine.train([long, short])
    assert metrics["truncated_samples"] == 1
    assert metrics["truncated_loss_tokens"] == 8  # tokens 32..39 were cut
    assert metrics["num_loss_tokens"] == 12 + 6
    assert metrics["nan_skipped"] == 0 and engine.version == 1
    assert len(long.input_ids) == 40  # the caller's sample is not modified


def test_zero_advantage_batch_changes_nothing_and_extra_samples_are_dropped(make_engine, rollout):
    engine = make_engine(lr=1e-2, max_samples=3)
    before = weights(engine)
    samples = [Sample([5, 6, 7, 8], [0, 0, 1, 1], [0.0, 0.0, -2.0, -2.0]) for _ in range(5)]
    metrics = engine.train(samples)
    assert metrics["dropped_samples"] == 2 and metrics["num_samples"] == 3
    assert metrics["zero_advantage_samples"] == 3 and metrics["grad_norm"] == 0.0
    assert all(torch.equal(before[k], v) for k, v in weights(engine).items())


def test_kl_to_reference_is_reported_and_only_loaded_when_on(make_engine, rollout):
    assert make_engine(lr=1e-2).ref_model is None  # KL off by default: no reference model
    engine = make_engine(lr=5e-2, kl_coef=0.1)
    assert engine.ref_model is not None
    tok = engine.tokenizer
    for step in range(3):
        samples, _ = rollout(engine, chat_prompts(tok, 2), n=4, max_tokens=8, reward_fn=share_of_e(tok), step=step)
        metrics = engine.train(samples)
    assert metrics["kl"] > 0  # the policy moved away from the frozen reference


def test_frozen_engine_refuses_to_train(tiny_model_dir):
    from vibe_rl.engine import load_engine
    from vibe_rl.errors import EngineError
    from vibe_rl.schema import EngineConfig

    engine = load_engine(EngineConfig(path=str(tiny_model_dir), device="cpu"), trainable=False)
    try:
        with pytest.raises(EngineError, match="trainable=False"):
            engine.train([Sample([1, 2], [0, 1], [0.0, -1.0], 1.0)])
    finally:
        engine.close()


def test_training_while_requests_are_in_flight(make_engine, rollout):
    from vibe_rl.engine import Engine, SamplingParams

    engine = make_engine(lr=1e-2)
    assert isinstance(engine, Engine)
    tok = engine.tokenizer
    prompts = chat_prompts(tok, 2)
    samples, _ = rollout(engine, prompts, n=4, max_tokens=8, reward_fn=share_of_e(tok))
    futures = [engine.submit(prompts[i % 2], SamplingParams(max_tokens=16, seed=i)) for i in range(12)]
    engine.train(samples)  # waits for the running batch, then steps; queued requests continue after
    more = [engine.submit(prompts[0], SamplingParams(max_tokens=4, seed=99))]
    gens = [f.result(timeout=120) for f in futures + more]
    assert all(g.token_ids for g in gens)
    assert {g.weight_version for g in gens} <= {0, 1} and gens[-1].weight_version == 1


def test_lr_warms_up_linearly_then_holds(make_engine, rollout):
    from vibe_rl.rl.grpo import scheduled_lr

    engine = make_engine(lr=1e-2, warmup_steps=4)
    tok = engine.tokenizer
    lrs, moved = [], []
    for step in range(5):
        samples, _ = rollout(engine, chat_prompts(tok, 2), n=4, max_tokens=8, reward_fn=share_of_e(tok), step=step)
        before = weights(engine)
        lrs.append(engine.train(samples)["lr"])
        moved.append(max(float((v - before[k]).abs().max()) for k, v in weights(engine).items()))
    assert lrs == pytest.approx([2.5e-3, 5e-3, 7.5e-3, 1e-2, 1e-2])
    assert moved[0] < moved[3]  # Adam's first step moves weights by about lr: a quarter of the full step
    assert scheduled_lr(engine.train_config.model_copy(update={"warmup_steps": 0}), 0) == 1e-2
