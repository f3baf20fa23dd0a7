"""The same GRPO step on 1 GPU (today's single-process engine) and on N GPUs (FSDP2, one process each).

    python benchmarks/multi_gpu.py --shape 7b --gpus 1,2
    python benchmarks/multi_gpu.py --shape 14b --gpus 2 --steps 2      # full fine-tune that needs 2 GPUs

The model is a random-init Qwen2.5 shape (vibe_rl.engine.shapes; built in memory, nothing
downloaded). The batch: `--samples` sequences of `--tokens` tokens (half prompt, half answer),
advantages +-1, micro-batches of `--micro-batch-size`, AdamW, bf16.

Per GPU count it reports the step time (median after one warm-up step), tokens/s, and the peak
memory of every GPU. For N > 1 it measures two things in one process group:
`train` (the sharded step alone) and `with_replica` (each GPU also holds the full bf16
generation replica a server keeps, re-synced after every step: what a server really uses).
`replica_sync_s` times one re-sync (FSDP unit by unit), `replica_sync_per_parameter_s` the same copy
done one all-gather per parameter (the way before), for comparison.
The 1-GPU figure is the single-process engine, whose one model both generates and trains.
Prints one JSON object (plus `scaling` ratios against the 1-GPU run when both ran).

`--variants` runs the N-GPU step under several trainer settings, each a `+`-joined list of:
`auto` / `step` / `micro_batch` (when gradients are reduce-scattered: VIBE_RL_GRAD_SYNC),
`keep` (reshard_after_forward off for the decoder layers: no all-gather in backward, more memory)
`mbN` (N sequences per micro-batch on every rank) and `tokN` (train.micro_batch_tokens N: a padded-token
budget per micro-batch instead). E.g. `--variants micro_batch,step,step+keep,auto+mb8,micro_batch+tok8192`.
Each N-GPU run reports the sync mode its steps used (`grad_sync`) and its synced backwards per step.

`--sharded-one` also runs the sharded trainer as a group of one process on one GPU: the FSDP2
machinery (hooks, copies, collectives of one rank) without another GPU, so its cost can be told
apart from the cost of talking to other GPUs. `--profile DIR` writes, per run, the torch profiler's
table of one step (CPU and GPU time per operator) and the GPU's busy share of that step.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# --shape smoke: a 2-layer model on CPU processes (gloo), to check this script without a GPU
SMOKE = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, intermediate_size=128,
             tie_word_embeddings=True)
SMOKE_VOCAB = 1024


def build_model(shape: str, device: str):
    import torch
    import transformers

    from vibe_rl.engine.shapes import QWEN_VOCAB, SHAPES

    dims = dict(SHAPES.get(shape) or SMOKE)
    config = transformers.Qwen2Config(vocab_size=QWEN_VOCAB if shape in SHAPES else SMOKE_VOCAB, max_position_embeddings=32768, rope_theta=1e6,
                                      use_sliding_window=False, layer_types=["full_attention"] * dims["num_hidden_layers"],
                                      pad_token_id=0, bos_token_id=None, eos_token_id=1, **dims)
    torch.manual_seed(0)
    with torch.device(device):
        return transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)


def make_batch(n: int, tokens: int) -> list:
    import math
    import random

    from vibe_rl.engine.shapes import QWEN_VOCAB
    from vibe_rl.rl.samples import Sample

    rng = random.Random(0)
    half = tokens // 2
    vocab = QWEN_VOCAB if on_gpu() else SMOKE_VOCAB
    old = -math.log(vocab)  # a random model's logprob: ratios start near 1
    return [Sample([rng.randrange(3, vocab) for _ in range(tokens)], [0] * half + [1] * (tokens - half),
                   [0.0] * half + [old] * (tokens - half), advantage=1.0 if i % 2 else -1.0, task_id=str(i // 8))
            for i in range(n)]


def on_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def timed(fn, steps: int, device) -> tuple[float, float, dict]:
    """Median seconds per call after one warm-up call, peak GB since the warm-up (0 on CPU), last result."""
    import torch

    gpu = on_gpu()
    sync = (lambda: torch.cuda.synchronize(device)) if gpu else (lambda: None)
    out = fn()
    sync()
    if gpu:
        torch.cuda.reset_peak_memory_stats(device)
    times = []
    for _ in range(steps - 1):
        t0 = time.perf_counter()
        out = fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), torch.cuda.max_memory_allocated(device) / 2**30 if gpu else 0.0, out


def profiled(fn, args, tag: str) -> None:
    """One more call of `fn` under torch.profiler -> DIR/<tag>.txt (operator table + GPU busy share)."""
    if not args.profile:
        return
    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu() else [])
    t0 = time.perf_counter()
    with profile(activities=activities) as prof:
        fn()
        if on_gpu():
            torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    events = prof.key_averages()
    gpu_us = sum(getattr(e, "self_device_time_total", 0) for e in events)
    table = events.table(sort_by="self_device_time_total" if on_gpu() else "self_cpu_time_total", row_limit=40)
    Path(args.profile).mkdir(parents=True, exist_ok=True)
    (Path(args.profile) / f"{tag}.txt").write_text(
        f"wall {wall:.3f} s, GPU kernel time {gpu_us / 1e6:.3f} s (summed over streams)\n{table}\n")


def single(args) -> dict:
    """Today's path: one process, one model that trains in place (TorchEngine's grpo_step call)."""
    import torch

    from vibe_rl.engine.loader import enable_checkpointing
    from vibe_rl.rl.batch import micro_batches
    from vibe_rl.rl.grpo import grpo_step
    from vibe_rl.schema import TrainConfig

    cfg = TrainConfig(lr=1e-6, micro_batch_size=args.micro_batch_size, max_samples=args.samples,
                      gradient_checkpointing=args.gradient_checkpointing, micro_batch_tokens=args.micro_batch_tokens)
    dev = "cuda" if on_gpu() else "cpu"
    model = build_model(args.shape, dev)
    if args.gradient_checkpointing:  # as TorchEngine does for train.gradient_checkpointing
        enable_checkpointing(model)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg.lr)
    batch = make_batch(args.samples, args.tokens)
    step_s, peak, (metrics, applied) = timed(
        lambda: grpo_step(model, opt, batch, cfg, pad_id=0, device=dev, max_len=args.tokens + 8), args.steps, 0)
    profiled(lambda: grpo_step(model, opt, batch, cfg, pad_id=0, device=dev, max_len=args.tokens + 8), args,
             f"single_mb{args.micro_batch_size}")
    passes = len(micro_batches(batch, cfg.micro_batch_size, cfg.micro_batch_tokens))
    return {"gpus": 1, "step_s": round(step_s, 3), "tokens_per_s": round(args.samples * args.tokens / step_s),
            "peak_gb_per_gpu": [round(peak, 2)], "passes_per_step": passes, "loss": metrics["loss"], "applied": applied}


def per_parameter_sync_s(trainer, replica, dev) -> float:
    """The replica sync done the earlier way, for comparison: one all-gather (`full_tensor`) per parameter."""
    import torch

    params = dict(replica.named_parameters())
    t0 = time.perf_counter()
    with torch.no_grad():
        for name, p in trainer.trainable:
            full = p.full_tensor() if hasattr(p, "full_tensor") else p.detach()
            params[name].copy_(full.view_as(params[name]))
    if on_gpu():
        torch.cuda.synchronize(dev)
    return time.perf_counter() - t0


def sharded(args) -> dict | None:
    """Under torchrun: the server's ShardedTrainer, first alone, then with a generation replica per GPU."""
    import torch

    from vibe_rl.engine import distributed
    from vibe_rl.engine.fsdp import ShardedTrainer
    from vibe_rl.schema import TrainConfig

    env = distributed.init_from_env()
    cfg = TrainConfig(lr=1e-6, micro_batch_size=args.micro_batch_size, max_samples=args.samples,
                      gradient_checkpointing=args.gradient_checkpointing, micro_batch_tokens=args.micro_batch_tokens)
    trainer = ShardedTrainer(build_model(args.shape, env.device), cfg, env, pad_id=0, max_model_len=args.tokens + 8,
                             grad_sync=args.grad_sync, reshard_after_forward=not args.keep_gathered)
    batch = make_batch(args.samples, args.tokens)
    dev = torch.device(env.device)
    train_s, train_peak, m1 = timed(lambda: trainer.step(batch), args.steps, dev)
    profiled(lambda: trainer.step(batch), args, f"sharded{env.world_size}_mb{args.micro_batch_size}_r{env.rank}")
    replica = build_model(args.shape, env.device).requires_grad_(False)
    trainer.sync_replica(replica)
    both_s, both_peak, m2 = timed(lambda: trainer.step(batch, replica=replica), args.steps, dev)
    t0 = time.perf_counter()
    trainer.sync_replica(replica)
    if on_gpu():
        torch.cuda.synchronize(dev)
    sync_s = time.perf_counter() - t0
    per_param_s = per_parameter_sync_s(trainer, replica, dev)
    peaks = env.gather((train_peak, both_peak))
    distributed.shutdown()
    if env.rank != 0:
        return None
    n = env.world_size
    return {"gpus": n, **({"variant": "fsdp"} if n == 1 else {}), "step_s": round(both_s, 3), "tokens_per_s": round(args.samples * args.tokens / both_s),
            "peak_gb_per_gpu": [round(p[1], 2) for p in peaks], "replica_sync_s": round(sync_s, 3),
            "replica_sync_per_parameter_s": round(per_param_s, 3),
            "train_only": {"step_s": round(train_s, 3), "tokens_per_s": round(args.samples * args.tokens / train_s),
                           "peak_gb_per_gpu": [round(p[0], 2) for p in peaks]},
            "grad_sync": trainer.last_sync_mode, "synced_backwards_per_step": trainer.last_grad_syncs,
            "reshard_after_forward": trainer.reshard_after_forward, "micro_batch_size": args.micro_batch_size,
            "micro_batch_tokens": args.micro_batch_tokens, "passes_per_step": trainer.last_passes,
            "loss": m2["loss"], "applied": m1["nan_skipped"] == 0 and m2["nan_skipped"] == 0}


def variant_options(variant: str, micro_batch_size: int, micro_batch_tokens: int = 0) -> tuple[str, bool, int, int]:
    """'step+keep+mb8' -> (grad sync mode, keep gathered weights, micro-batch size, micro-batch token budget)."""
    mode, keep, mb, tok = "auto", False, micro_batch_size, micro_batch_tokens
    for part in filter(None, variant.split("+")):
        if part in ("auto", "step", "micro_batch"):
            mode = part
        elif part == "keep":
            keep = True
        elif part.startswith("mb") and part[2:].isdigit():
            mb = int(part[2:])
        elif part.startswith("tok") and part[3:].isdigit():
            tok = int(part[3:])
        else:
            raise SystemExit(f"unknown variant part {part!r}: use auto|step|micro_batch, keep, mbN, tokN")
    return mode, keep, mb, tok


def launch(args, gpus: int, variant: str = "auto", sharded_one: bool = False) -> dict:
    mode, keep, mb, tok = variant_options(variant, args.micro_batch_size, args.micro_batch_tokens)
    if gpus == 1 and not sharded_one:
        mb, tok = args.micro_batch_size, args.micro_batch_tokens
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        child = [__file__, "--child", "--shape", args.shape, "--samples", str(args.samples), "--tokens",
                 str(args.tokens), "--steps", str(args.steps), "--micro-batch-size", str(mb), "--micro-batch-tokens", str(tok), "--grad-sync", mode, *(["--keep-gathered"] if keep else []),
                 *(["--gradient-checkpointing"] if args.gradient_checkpointing else []),
                 *(["--profile", str(Path(args.profile).resolve())] if args.profile else []), "--out", str(out)]
        if gpus == 1 and not sharded_one:
            cmd = [sys.executable, *child]
        else:
            from vibe_rl.engine.distributed import free_port

            cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={gpus}",
                   f"--master-port={free_port()}", *child]
        env = {**os.environ, "NCCL_NVLS_ENABLE": "0"}
        if args.shape != "smoke":
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(gpus))
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        if proc.returncode != 0 or not out.is_file():
            return {"gpus": gpus, "variant": variant, "error": (proc.stdout + proc.stderr)[-3000:]}
        result = json.loads(out.read_text())
        return result if gpus == 1 else {"variant": variant, **result}


def all_runs(args, variants: list[str]) -> list[dict]:
    """The single-process run for a count of 1, each variant for N > 1, and the FSDP2 group of one when asked."""
    runs = []
    for gpus in (int(x) for x in args.gpus.split(",")):
        if gpus == 1:
            runs.append(launch(args, 1))
            if args.sharded_one:
                runs += [{**launch(args, 1, v, sharded_one=True), "variant": f"fsdp+{v}"} for v in variants]
        else:
            runs += [launch(args, gpus, v) for v in variants]
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="7b", choices=["0.5b", "1.5b", "3b", "7b", "14b", "smoke"])
    ap.add_argument("--gpus", default="1,2", help="GPU counts to run, comma-separated")
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--steps", type=int, default=3, help="steps per configuration (the first is a warm-up)")
    ap.add_argument("--micro-batch-size", type=int, default=4)
    ap.add_argument("--micro-batch-tokens", type=int, default=0,
                    help="train.micro_batch_tokens on every run: a padded-token budget per micro-batch (0: by count)")
    ap.add_argument("--gradient-checkpointing", action="store_true",
                    help="train.gradient_checkpointing on every run (1 GPU and N GPUs alike)")
    ap.add_argument("--variants", default="auto", help=(
        "N-GPU trainer settings to compare, comma-separated; each a +-joined list of auto|step|micro_batch "
        "(gradient sync), keep (no reshard after forward), mbN (micro-batch size); default: auto"))
    ap.add_argument("--sharded-one", action="store_true",
                    help="with a count of 1: also run the FSDP2 trainer as a group of one (its own overhead)")
    ap.add_argument("--profile", metavar="DIR", help="write one profiled step per run to DIR/<run>.txt")
    ap.add_argument("--grad-sync", default="auto", help=argparse.SUPPRESS)
    ap.add_argument("--keep-gathered", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.steps = max(args.steps, 2)
    if args.child:
        result = sharded(args) if "WORLD_SIZE" in os.environ else single(args)
        if result is not None:
            Path(args.out).write_text(json.dumps(result))
        return
    variants = [v.strip() for v in args.variants.split(",") if v.strip()] or ["auto"]
    for v in variants:
        variant_options(v, args.micro_batch_size, args.micro_batch_tokens)  # fail fast on a typo
    runs = all_runs(args, variants)
    report = {"benchmark": "multi_gpu", "shape": args.shape, "samples": args.samples, "tokens": args.tokens,
              "micro_batch_size": args.micro_batch_size, "micro_batch_tokens": args.micro_batch_tokens,
              "gradient_checkpointing": args.gradient_checkpointing, "runs": runs}
    one = next((r for r in runs if r.get("gpus") == 1 and "variant" not in r and "error" not in r), None)
    if one is not None and not one["peak_gb_per_gpu"][0]:  # CPU smoke run: no memory figures
        one = None
    for r in runs:
        if one is not None and r is not one and "error" not in r:
            key = f"{r['gpus']}_vs_1" + (f"_{r['variant']}" if len(variants) > 1 or r["gpus"] == 1 else "")
            report.setdefault("scaling", {})[key] = {
                "throughput_ratio": round(r["tokens_per_s"] / one["tokens_per_s"], 3),
                "train_only_throughput_ratio": round(r["train_only"]["tokens_per_s"] / one["tokens_per_s"], 3),
                "peak_memory_ratio": round(max(r["peak_gb_per_gpu"]) / one["peak_gb_per_gpu"][0], 3),
                "train_only_peak_memory_ratio": round(
                    max(r["train_only"]["peak_gb_per_gpu"]) / one["peak_gb_per_gpu"][0], 3)}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
