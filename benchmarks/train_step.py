"""One weight update on an agent's shape of batch: long prompts, short answers (the CPU demo's by default).

    python benchmarks/train_step.py --model smollm2 --device cpu --dtype float32
    python benchmarks/train_step.py --model tiny --samples 8 --prompt-tokens 200

Builds `--samples` rows of `--prompt-tokens` prompt ids and `--answer-tokens` written ids (deterministic ids, every
row a little longer than the one before so answers sit at different offsets, advantages +1/-1), then times
`engine.train` (the server's update: micro-batches, forward, loss, backward, optimiser step) `--repeats` times
after one warm-up, twice: with the logits projected only at the scored positions (what `rl.batch.score` does) and
with the full (B, T, V) logits as before (`--compare-full`, on by default). The defaults are the SmolLM2 demo's:
24 ballots of ~490 prompt and 16 answer tokens, LoRA rank 16, micro-batches of 4. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def rows(n: int, prompt: int, answer: int, vocab: int) -> list:
    from vibe_rl.rl.samples import Sample

    out = []
    for i in range(n):
        p = prompt + 2 * i  # answers at different offsets, as in a real batch
        ids = [(31 * k + 7 * i) % (vocab - 10) + 5 for k in range(p + answer)]
        out.append(Sample(ids, [0] * p + [1] * answer, [0.0] * p + [-2.0] * answer,
                          advantage=1.0 if i % 2 else -1.0, episode_id=f"e{i}"))
    return out


def timed(engine, samples, repeats: int) -> list[float]:
    engine.train(samples)  # warm-up (allocator, first LoRA / optimiser state)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        engine.train(samples)
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2", help="'smollm2', 'tiny' or a local HF directory")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--samples", type=int, default=24)
    ap.add_argument("--prompt-tokens", type=int, default=490)
    ap.add_argument("--answer-tokens", type=int, default=16)
    ap.add_argument("--micro-batch", type=int, default=4)
    ap.add_argument("--lora-rank", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cpu-threads", type=int, default=0, help="0: torch's default")
    ap.add_argument("--no-compare-full", dest="compare_full", action="store_false",
                    help="Skip the full-logits run")
    args = ap.parse_args()

    import torch

    from vibe_rl.engine import load_engine
    from vibe_rl.rl import batch as batch_module
    from vibe_rl.schema import EngineConfig, LoraConfig, TrainConfig

    if args.cpu_threads:
        torch.set_num_threads(args.cpu_threads)
    engine = load_engine(
        EngineConfig(path=args.model, device=args.device, dtype=args.dtype, seed=0,
                     max_model_len=args.prompt_tokens + 2 * args.samples + args.answer_tokens + 8,
                     lora=LoraConfig(rank=args.lora_rank, alpha=2 * args.lora_rank)),
        TrainConfig(lr=1e-5, micro_batch_size=args.micro_batch, max_samples=args.samples))
    try:
        vocab = int(engine.model.get_input_embeddings().num_embeddings)
        samples = rows(args.samples, args.prompt_tokens, args.answer_tokens, vocab)
        kept = timed(engine, samples, args.repeats)
        result = {"model": args.model, "device": args.device, "dtype": args.dtype, "samples": args.samples,
                  "prompt_tokens": args.prompt_tokens, "answer_tokens": args.answer_tokens,
                  "micro_batch": args.micro_batch, "lora_rank": args.lora_rank, "threads": torch.get_num_threads(),
                  "kept_logits_s": [round(t, 3) for t in kept], "kept_logits_median_s": round(statistics.median(kept), 3)}
        if args.compare_full:
            saved = batch_module._kept_logits
            batch_module._kept_logits = lambda model, batch, keep: model(
                input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, keep]
            try:
                full = timed(engine, samples, args.repeats)
            finally:
                batch_module._kept_logits = saved
            result["full_logits_s"] = [round(t, 3) for t in full]
            result["full_logits_median_s"] = round(statistics.median(full), 3)
            result["kept_over_full"] = round(statistics.median(kept) / statistics.median(full), 3)
    finally:
        engine.close()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
