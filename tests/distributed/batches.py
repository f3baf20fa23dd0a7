"""Deterministic GRPO batches and settings shared by the single-process side and the ranks."""

from __future__ import annotations

import random

TOLERANCE = 1e-5  # relative, fp32 on CPU: sharded and single-process losses differ only by float rounding
LR, MICRO_BATCH, MAX_LEN = 1e-2, 2, 256
SCENARIOS = {  # name -> (lora rank, kl_coef, gradient checkpointing, micro-batch token budget)
    "full": (0, 0.0, False, 0),
    "lora": (4, 0.0, False, 0),
    "kl": (0, 0.1, False, 0),
    "checkpointing": (0, 0.0, True, 0),
    "token_budget": (0, 0.0, False, 64),  # 2-6 rows a pass: the ranks' own cuts differ, their pass counts may not
}


def batch(seed: int, n: int = 10) -> list:
    """n samples of 6-30 tokens with a prompt part, rollout logprobs and mixed advantages (zeros included)."""
    from vibe_rl.rl.samples import Sample

    rng = random.Random(seed)
    out = []
    for i in range(n):
        length = rng.randint(6, 30)
        prompt = rng.randint(2, length - 2)
        ids = [rng.randrange(3, 1000) for _ in range(length)]
        mask = [0] * prompt + [1] * (length - prompt)
        old = [(-2.0 - rng.random()) if m else 0.0 for m in mask]
        out.append(Sample(ids, mask, old, advantage=rng.choice([-1.0, 0.0, 1.0, 0.5]), task_id=str(i % 3),
                          episode_id=f"e{seed}-{i}"))
    return out


def configs(model_path: str, scenario: str):
    from vibe_rl.schema import EngineConfig, LoraConfig, TrainConfig

    rank, kl, checkpointing, tokens = SCENARIOS[scenario]
    engine = EngineConfig(path=model_path, device="cpu", max_model_len=MAX_LEN, lora=LoraConfig(rank=rank, alpha=8),
                          generator="simple")
    return engine, TrainConfig(lr=LR, micro_batch_size=MICRO_BATCH, kl_coef=kl, gradient_checkpointing=checkpointing,
                               micro_batch_tokens=tokens)


def nan_loss_batch() -> list:
    """batch(1) where the longest trained-on sample has a NaN rollout logprob: its loss is NaN, its logits
    are finite. The split gives the longest sample to rank 0, whose micro-batches run shortest first, so
    the NaN comes in rank 0's last micro-batch, after gradients were accumulated."""
    samples = batch(1)
    longest = max((s for s in samples if s.advantage != 0.0), key=lambda s: len(s.input_ids))
    longest.old_logprobs[-1] = float("nan")
    return samples


POISON_TOKEN = 1050  # a token whose input embedding is NaN in `poisoned_model` (batch() never uses ids >= 1000)


def poisoned_batch() -> list:
    """batch(5) where the first sample (trained on: advantage 1) reads POISON_TOKEN: only the rank that
    gets it sees non-finite logits."""
    samples = batch(5, n=6)
    samples[0].input_ids[1] = POISON_TOKEN
    samples[0].advantage = 1.0
    return samples


def poisoned_model(tiny_model_dir, out) -> str:
    """The tiny model, untied (lm_head stays finite), with a NaN input embedding for POISON_TOKEN."""
    import torch

    from vibe_rl.engine.loader import load_causal_lm, load_tokenizer

    model = load_causal_lm(tiny_model_dir, "cpu", torch.float32)
    model.config.tie_word_embeddings = False
    model.lm_head.weight = torch.nn.Parameter(model.model.embed_tokens.weight.detach().clone())
    with torch.no_grad():
        model.model.embed_tokens.weight[POISON_TOKEN] = float("nan")
    model.save_pretrained(out, safe_serialization=True)
    load_tokenizer(tiny_model_dir).save_pretrained(out)
    return str(out)
