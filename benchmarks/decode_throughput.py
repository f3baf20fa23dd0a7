"""Decode throughput of one full batch: B requests x M new tokens, all submitted at once.

Prints ONE JSON object: tok_s (generated tokens / wall, prefill included), the
weight-streaming bound (B x bandwidth / weight bytes: every decode step reads all
weights once) and the share of it reached. Both generators can be measured in one
run (--generators paged,simple); `vllm` in --generators (or --engine vllm, the same as --generators vllm)
measures the vLLM engine (frozen, no trainer copy) on the same load; --arch phi3 builds a random Phi-3
of --shape (an architecture only vLLM or the simple loop serves).

    python benchmarks/decode_throughput.py --device cuda --shape 7b --batch 64 --max-tokens 256
    python benchmarks/decode_throughput.py --device cuda --shape 7b --batch 64 --generators paged,vllm
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--shape", default="7b")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--prompt", type=int, default=64, help="prompt tokens per request")
    ap.add_argument("--generators", default="paged")
    ap.add_argument("--bandwidth-tb-s", type=float, default=4.3, help="measured copy bandwidth (H200: ~4.3)")
    ap.add_argument("--engine", default="torch", choices=["torch", "vllm"], help="vllm: --generators vllm")
    ap.add_argument("--arch", default="qwen2", choices=["qwen2", "phi3"])
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.85, help="vLLM's share of the GPU")
    args = ap.parse_args()
    if args.engine == "vllm":
        args.generators = "vllm"

    import torch

    from vibe_rl.engine import SamplingParams, load_engine
    from vibe_rl.engine.shapes import build_random_model
    from vibe_rl.schema import EngineConfig

    path = "tiny" if args.shape == "tiny" and args.arch == "qwen2" else tempfile.mkdtemp(prefix="vibe-rl-bench-")
    if path != "tiny":
        build_random_model(args.shape, path, device="cuda" if args.device.startswith("cuda") else "cpu", arch=args.arch,
                           vocab="tokenizer" if args.shape == "tiny" else "qwen")
    out = {"shape": args.shape, "arch": args.arch, "batch": args.batch, "max_tokens": args.max_tokens}
    for name in args.generators.split(","):
        vllm = name == "vllm"
        eng = load_engine(EngineConfig(path=path, device=args.device, generator="auto" if vllm else name,
                                       engine="vllm" if vllm else "torch", max_batch_size=args.batch,
                                       gpu_memory_utilization=args.gpu_memory_utilization,
                                       max_model_len=args.prompt + args.max_tokens + 64), trainable=False)
        weight_bytes = (sum(f.stat().st_size for f in eng.path.glob("*.safetensors")) if vllm else
                        sum(p.numel() * p.element_size() for p in eng.model.parameters()))
        vocab = min(eng.vocab_size, len(eng.tokenizer))
        prompts = [[(97 * i + 13 * j) % (vocab - 300) + 300 for j in range(args.prompt)] for i in range(args.batch)]

        def batch(eng, prompts, tokens: int) -> tuple[int, float]:
            start = time.perf_counter()
            futures = [eng.submit(p, SamplingParams(max_tokens=tokens, seed=i)) for i, p in enumerate(prompts)]
            n = sum(len(f.result().token_ids) for f in futures)
            return n, time.perf_counter() - start

        batch(eng, prompts, args.max_tokens)  # warm-up: kernels, CUDA graphs of every batch/context bucket this load meets
        n, wall = batch(eng, prompts, args.max_tokens)
        bound = args.batch * args.bandwidth_tb_s * 1e12 / weight_bytes
        out[name] = {"tok_s": round(n / wall, 1), "tokens": n, "wall_s": round(wall, 3),
                     "weight_gb": round(weight_bytes / 1e9, 2), "bandwidth_bound_tok_s": round(bound),
                     "share_of_bound": round(n / wall / bound, 3),
                     "peak_mem_gb": round(torch.cuda.max_memory_allocated() / 2**30, 1) if args.device != "cpu" else None}
        eng.close()
        del eng
        if args.device != "cpu":
            torch.cuda.empty_cache()
    torch_names = [n for n in args.generators.split(",") if n != "vllm"]
    if "vllm" in out and torch_names:  # the same load on both engines in one run
        out[f"{torch_names[0]}_over_vllm"] = round(out[torch_names[0]]["tok_s"] / max(out["vllm"]["tok_s"], 1e-9), 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
