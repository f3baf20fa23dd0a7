"""Agent-shaped generation load on the engine: concurrent episodes of sequential, growing calls.

N episodes run at once (one thread each), in GRPO groups of --group episodes that
share a task prompt. An episode has --players players and makes --turns calls one
after another; each call of a player sends that player's previous prompt + answer +
a new message of --message tokens (other players' moves), exactly what a multi-turn
agent game sends. Prints ONE JSON object: tok_s, calls_s, prefix_hit_rate,
p50_call_s, peak_mem_gb of the engine under test (`--generator`, default auto), and
with --baseline the same load on the simple loop in the same process (capped at
--baseline-seconds: its rate over the calls it finished, which favours the baseline,
since its later calls carry longer contexts) and the ratio.

--engine vllm plays the load on the vLLM engine (frozen: no trainer copy); --engine both plays it on
the torch engine and then on vLLM in the same process and reports `torch_over_vllm` (tok/s ratio; `generator` says paged or simple).
--arch phi3 builds a random Phi-3 of --shape instead of a Qwen2: an architecture the paged engine does not
drive, so only vLLM (or the simple loop) serves it. vLLM on a GPU takes --gpu-memory-utilization.

--runs N plays the load N times on the same engine and reports the last (`tok_s`), with every
run's rate in `tok_s_runs`: the first run of a fresh process also compiles the Triton kernels
and captures the CUDA graphs of every context length it meets (a server pays that once, in its
first minutes; on an H200 it cost the first run about a quarter of its rate).

    python benchmarks/agentic_rollout.py --device cuda --shape 0.5b --episodes 16 --turns 24 --max-tokens 256 --baseline
    python benchmarks/agentic_rollout.py --device cuda --shape 0.5b --engine both    # paged / vLLM, one run
    python benchmarks/agentic_rollout.py --device cpu --shape tiny --episodes 4 --turns 6 --max-tokens 16   # smoke
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path


def run_load(engine, args, deadline: float | None = None, salt: int = 0) -> dict:
    """Play the load once; `salt` gives other prompts (a new run must not reuse an earlier run's cache)."""
    from vibe_rl.engine import SamplingParams

    vocab = len(engine.tokenizer)
    latencies: list[float] = []
    generated = [0]
    lock = threading.Lock()

    def episode(e: int) -> None:
        rng = random.Random(f"{salt}:task:{e // args.group}")  # the group's task prompt
        task = [rng.randrange(300, vocab - 10) for _ in range(args.system)]
        rng = random.Random(f"{salt}:episode:{e}")
        convs = [task + [rng.randrange(300, vocab - 10) for _ in range(16)] for _ in range(args.players)]
        for t in range(args.turns):
            if deadline is not None and time.monotonic() > deadline:
                return
            p = t % args.players
            prompt = convs[p] + [rng.randrange(300, vocab - 10) for _ in range(args.message)]
            start = time.monotonic()
            g = engine.generate(prompt, SamplingParams(temperature=1.0, max_tokens=args.max_tokens, seed=salt * 10**6 + e * 1000 + t))
            with lock:
                latencies.append(time.monotonic() - start)
                generated[0] += len(g.token_ids)
            convs[p] = prompt + g.token_ids

    threads = [threading.Thread(target=episode, args=(e,)) for e in range(args.episodes)]
    before = dict(engine.stats)
    start = time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.monotonic() - start
    prompt = engine.stats.get("prompt_tokens", 0) - before.get("prompt_tokens", 0)
    hits = engine.stats.get("prefix_hit_tokens", 0) - before.get("prefix_hit_tokens", 0)
    return {"calls": len(latencies), "generated_tokens": generated[0], "wall_s": round(wall, 2),
            "tok_s": round(generated[0] / wall, 1), "calls_s": round(len(latencies) / wall, 2),
            "prefix_hit_rate": round(hits / prompt, 4) if prompt else 0.0,
            "p50_call_s": round(statistics.median(latencies), 3) if latencies else None,
            "largest_batch": engine.stats.get("largest_batch", 0)}


def warm_load(args) -> argparse.Namespace:
    return argparse.Namespace(**{**vars(args), "episodes": 2, "turns": 2, "max_tokens": 8})


def measure(eng, args, torch) -> dict:
    """Warm up, play the load --runs times on `eng` (then closed); the last run, every run's rate, start-up."""
    started = time.monotonic()
    run_load(eng, warm_load(args))
    first_calls_s = round(time.monotonic() - started, 2)
    runs = [run_load(eng, args, salt=i + 1) for i in range(max(1, args.runs))]
    eng.close()
    return {**runs[-1], "tok_s_runs": [r["tok_s"] for r in runs], "warmup_s": first_calls_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--shape", default="0.5b", help="0.5b|1.5b|3b|7b|14b (random init, built offline) or 'tiny'")
    ap.add_argument("--model", default=None, help="an existing HF directory instead of --shape")
    ap.add_argument("--episodes", type=int, default=16)
    ap.add_argument("--turns", type=int, default=24)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--players", type=int, default=4)
    ap.add_argument("--group", type=int, default=4, help="episodes sharing one task prompt (a GRPO group)")
    ap.add_argument("--system", type=int, default=300, help="tokens of the shared task prompt")
    ap.add_argument("--message", type=int, default=48, help="new tokens each call adds before the question")
    ap.add_argument("--generator", default="auto", choices=["auto", "paged", "simple"])
    ap.add_argument("--baseline", action="store_true", help="also run the simple loop on the same load")
    ap.add_argument("--baseline-seconds", type=float, default=120.0)
    ap.add_argument("--runs", type=int, default=2, help="times the load is played on the engine under test")
    ap.add_argument("--max-model-len", type=int, default=8192)
    ap.add_argument("--engine", default="torch", choices=["torch", "vllm", "both"])
    ap.add_argument("--arch", default="qwen2", choices=["qwen2", "phi3"], help="architecture of the --shape model")
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.85, help="vLLM's share of the GPU")
    args = ap.parse_args()

    import torch

    from vibe_rl.engine import load_engine
    from vibe_rl.engine.shapes import build_random_model
    from vibe_rl.schema import EngineConfig

    tmp = tempfile.mkdtemp(prefix="vibe-rl-bench-")
    path = args.model or ("tiny" if args.shape == "tiny" and args.arch == "qwen2" else tmp)
    if path == tmp:
        build_random_model(args.shape, tmp, device="cuda" if args.device.startswith("cuda") else "cpu", arch=args.arch,
                           vocab="tokenizer" if args.shape == "tiny" else "qwen")
    out = {"shape": args.shape, "arch": args.arch, "device": args.device, "episodes": args.episodes,
           "turns": args.turns, "max_tokens": args.max_tokens, "players": args.players}

    def engine(generator: str, name: str = "torch"):
        return load_engine(EngineConfig(path=path, device=args.device, generator=generator, max_batch_size=64,
                                        max_model_len=args.max_model_len, engine=name,
                                        gpu_memory_utilization=args.gpu_memory_utilization), trainable=False)

    if args.engine == "vllm":
        out.update(engine="vllm", **measure(engine("auto", "vllm"), args, torch))
        print(json.dumps(out))
        return
    eng = engine(args.generator)
    out["generator"] = "paged" if getattr(eng, "paged", None) is not None else "simple"
    warm = warm_load(args)
    run_load(eng, warm)  # first calls pay one-off costs (kernel loading, graph capture of small shapes)
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    runs = [run_load(eng, args, salt=i + 1) for i in range(max(1, args.runs))]
    out.update(runs[-1])
    out["tok_s_runs"] = [r["tok_s"] for r in runs]
    out["peak_mem_gb"] = round(torch.cuda.max_memory_allocated() / 2**30, 2) if args.device.startswith("cuda") else None
    eng.close()
    del eng
    if args.baseline:
        base = engine("simple")
        run_load(base, warm)
        out["baseline"] = run_load(base, args, deadline=time.monotonic() + args.baseline_seconds,
                                   salt=max(1, args.runs))  # the prompts of the headline run
        base.close()
        out["speedup_tok_s"] = round(out["tok_s"] / max(out["baseline"]["tok_s"], 1e-9), 2)
    if args.engine == "both":
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
        out["vllm"] = measure(engine("auto", "vllm"), args, torch)
        out["torch_over_vllm"] = round(out["tok_s"] / max(out["vllm"]["tok_s"], 1e-9), 2)
    print(json.dumps(out))
    sys.stdout.flush()
    Path(tmp).exists() and __import__("shutil").rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
