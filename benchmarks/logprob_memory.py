"""Memory and time of scoring loss tokens for training: all rows at once vs chunks recomputed in backward.

    python benchmarks/logprob_memory.py --rows 4096 --vocab 152064

`rl.logprobs.token_logprobs` turns bf16 logits (N, V) into the sampled tokens' log-probs under the
sampling distribution (fp32 work: scale by temperature, optional top-p, log-softmax). Each variant
runs forward + backward on the same random logits (`--top-p` < 1 adds the nucleus sort) and reports
the peak memory above the logits themselves and the median time of `--repeats` runs after a warm-up. On CPU the
times are reported and memory is 0 (torch does not track CPU allocations). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def measure(rows: int, vocab: int, top_p: float, chunk: int, repeats: int) -> dict:
    import torch

    from vibe_rl.rl import logprobs

    gpu = torch.cuda.is_available()
    device = "cuda" if gpu else "cpu"
    gen = torch.Generator(device=device).manual_seed(0)
    logits = torch.randn(rows, vocab, generator=gen, device=device, dtype=torch.bfloat16).requires_grad_(True)
    targets = torch.randint(0, vocab, (rows,), generator=gen, device=device)
    temps, tops = torch.full((rows,), 0.9, device=device), torch.full((rows,), top_p, device=device)
    logprobs.CHUNK_ROWS = chunk
    logprobs.token_logprobs(logits, targets, temps, tops).sum().backward()  # warm-up (first checkpoint call: ~2 s)
    times, peak = [], 0.0
    for _ in range(repeats):
        logits.grad = None
        if gpu:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
        t0 = time.perf_counter()
        out = logprobs.token_logprobs(logits, targets, temps, tops)
        out.sum().backward()
        if gpu:
            torch.cuda.synchronize()
            peak = max(peak, (torch.cuda.max_memory_allocated() - base) / 2**30)
        times.append(time.perf_counter() - t0)
    return {"chunk_rows": chunk, "peak_gb_above_logits": round(peak, 2), "s": round(statistics.median(times), 4)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=4096, help="loss tokens in one micro-batch")
    ap.add_argument("--vocab", type=int, default=152064, help="Qwen2.5's vocabulary by default")
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--chunk", type=int, default=1024, help="rows per chunk for the chunked variant")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    whole = measure(args.rows, args.vocab, args.top_p, args.rows + 1, args.repeats)
    chunked = measure(args.rows, args.vocab, args.top_p, args.chunk, args.repeats)
    print(json.dumps({"benchmark": "logprob_memory", "rows": args.rows, "vocab": args.vocab, "top_p": args.top_p,
                      "whole": whole, "chunked": chunked,
                      "memory_ratio": round(chunked["peak_gb_above_logits"] / whole["peak_gb_above_logits"], 3)
                      if whole["peak_gb_above_logits"] else None,
                      "time_ratio": round(chunked["s"] / whole["s"], 3)}))


if __name__ == "__main__":
    main()
