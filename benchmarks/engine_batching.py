"""Batched vs sequential generation on the torch engine (tiny model, CPU).

Sends the same 32 seeded requests twice: all at once (the engine batches them)
and one after another (each request is its own batch). Prints ONE JSON object:
{"batched_tok_s", "sequential_tok_s", "ratio", "peak_rss_mb", ...}.

    .venv/bin/python benchmarks/engine_batching.py [--requests 32] [--max-tokens 64]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--model", default="tiny", help="model path ('tiny' builds the offline model)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    import torch

    from vibe_rl.engine import SamplingParams, load_engine
    from vibe_rl.schema import EngineConfig

    engine = load_engine(EngineConfig(path=args.model, device=args.device, max_model_len=1024), trainable=False)
    tok = engine.tokenizer
    prompts = [tok.encode(tok.apply_chat_template(
        [{"role": "user", "content": f"Player {i}: describe your secret word in one sentence."}],
        add_generation_prompt=True, tokenize=False)) for i in range(args.requests)]
    params = [SamplingParams(temperature=1.0, max_tokens=args.max_tokens, seed=i) for i in range(args.requests)]
    # Warm up both shapes (a full batch and a single request): first calls pay one-off costs
    # (lazy kernel loading and library handles on GPU) that neither mode should be charged for.
    [f.result() for f in [engine.submit(p, SamplingParams(max_tokens=8, seed=i)) for i, p in enumerate(prompts)]]
    engine.generate(prompts[0], SamplingParams(max_tokens=8, seed=0))

    start = time.perf_counter()
    futures = [engine.submit(p, s) for p, s in zip(prompts, params, strict=True)]
    batched = [f.result() for f in futures]
    batched_s = time.perf_counter() - start

    start = time.perf_counter()
    sequential = [engine.generate(p, s) for p, s in zip(prompts, params, strict=True)]
    sequential_s = time.perf_counter() - start
    engine_threads = engine.cpu_threads or torch.get_num_threads()
    engine.close()

    batched_tokens = sum(len(g.token_ids) for g in batched)
    sequential_tokens = sum(len(g.token_ids) for g in sequential)
    batched_tok_s = batched_tokens / batched_s
    sequential_tok_s = sequential_tokens / sequential_s
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(json.dumps({
        "batched_tok_s": round(batched_tok_s, 1),
        "sequential_tok_s": round(sequential_tok_s, 1),
        "ratio": round(batched_tok_s / sequential_tok_s, 2),
        "peak_rss_mb": round(peak_kb / 1024, 1),
        "requests": args.requests,
        "max_tokens": args.max_tokens,
        "batched_tokens": batched_tokens,
        "sequential_tokens": sequential_tokens,
        "batched_s": round(batched_s, 3),
        "sequential_s": round(sequential_s, 3),
        "same_tokens": [g.token_ids for g in batched] == [g.token_ids for g in sequential],
        "device": args.device,
        "engine_cpu_threads": engine_threads,
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "model": args.model,
    }))


if __name__ == "__main__":
    sys.exit(main())
