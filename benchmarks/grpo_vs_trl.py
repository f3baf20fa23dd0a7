"""One GRPO step of vibe-rl against TRL's GRPOTrainer: same model, prompts, batch, lengths, in one run.

A step is what an update costs end to end: generating `groups x group_size`
completions of `max_tokens` tokens, scoring them with the same reward, and one
optimiser step on them (group-normalised advantages, clipped policy gradient,
no KL, loss averaged over all completion tokens). vibe-rl runs it through its
own engine (`load_engine`: the TorchEngine the swarm server uses, paged
generation on a GPU) and `engine.train`; TRL runs `GRPOTrainer` (beta 0, no
vLLM, HF `generate`). Both load the same random-init weights with the same
loader, in bf16 on a GPU (fp32 on CPU), with the same micro-batch size, lr,
gradient clipping and gradient checkpointing setting. Each side runs
`--warmup-steps` untimed steps, then `--steps` timed ones; the median is kept.

By default both sides generate exactly `max_tokens` tokens (`--ignore-eos`):
TRL through `min_new_tokens`, vibe-rl by emptying its engine's EOS set (a
benchmark-only switch); both mean completion lengths are printed.

Prints ONE JSON object; `ratio` = vibe-rl step time / TRL step time (lower is better).

    python benchmarks/grpo_vs_trl.py --shape 1.5b --device cuda
    python benchmarks/grpo_vs_trl.py --shape tiny --device cpu --groups 2 --group-size 4 --max-tokens 16

Needs `pip install trl datasets` (TRL 1.16 was used; its GRPOConfig has `generation_batch_size`,
`steps_per_generation` and no `max_prompt_length`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PROMPTS = [  # short, distinct; the i-th GRPO group gets PROMPTS[i % len(PROMPTS)]
    "Describe the word coffee in one sentence without saying it.",
    "Translate 'the village sleeps at night' into French.",
    "Which word does not belong: apple, banana, carrot, orange?",
    "You are player 3 in a game of who is spy. Your word is ocean. Describe it.",
    "Call the tool get_weather for the city of Paris and report the result.",
    "What is two plus three? Answer with a number.",
    "Guess the five letter word. The first letter is t and the last is r.",
    "Return a JSON object with the keys name and score for the winner.",
    "Spell the word tiger backwards and count its letters.",
    "The host says player 5 was eliminated. Who do you vote for next round?",
    "Find a word that rhymes with cat and use it in a sentence.",
    "Explain in one sentence why the seer checks one player each night.",
    "Write a short sentence about a river in the mountains.",
    "Is milk something you drink in the morning? Answer yes or no.",
    "Name three animals that live in the sea.",
    "Summarise the rules of werewolves in two sentences.",
]


def reward_of(ids: list[int]) -> float:
    """The reward both sides use: the share of even token ids. Cheap, and it varies within a group even
    for a random model (so no group is all-equal and every completion takes part in the update)."""
    return sum(1 for t in ids if t % 2 == 0) / max(len(ids), 1)


def peak_gb(device: str, reset: bool = False) -> float | None:
    """Peak CUDA memory allocated since the last reset (GiB); None on CPU."""
    import torch

    if not device.startswith("cuda"):
        return None
    peak = round(torch.cuda.max_memory_allocated() / 2**30, 1)
    if reset:
        torch.cuda.reset_peak_memory_stats()
    return peak


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def build_model(args: argparse.Namespace) -> tuple[Path, int]:
    """The model directory both sides load, and its parameter count."""
    from vibe_rl.engine.loader import resolve_model_path
    from vibe_rl.engine.shapes import build_random_model

    if args.shape == "tiny":
        import json as _json

        path = resolve_model_path("tiny")
        return path, int(_json.loads((path / "vibe_rl_tiny.json").read_text())["parameters"])
    path = Path(tempfile.mkdtemp(prefix="vibe-rl-grpo-vs-trl-"))
    device = "cuda" if args.device.startswith("cuda") else "cpu"
    n = build_random_model(args.shape, path, vocab=args.vocab, device=device)
    return path, n


def chat_ids(tokenizer: Any, prompt: str) -> list[int]:
    """Prompt ids as TRL makes them from a conversational dataset row (chat template, generation prompt)."""
    out = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                        tokenize=True)
    if hasattr(out, "keys"):  # transformers 5 returns a BatchEncoding
        out = out["input_ids"]
    return [int(t) for t in out]


def run_vibe(args: argparse.Namespace, path: Path, prompts: list[str]) -> dict[str, Any]:
    from vibe_rl.engine import SamplingParams, load_engine
    from vibe_rl.engine.loader import load_tokenizer
    from vibe_rl.rl.advantages import grpo_advantages
    from vibe_rl.rl.samples import Turn, build_samples
    from vibe_rl.schema import EngineConfig, TrainConfig

    total = args.groups * args.group_size
    tokenizer = load_tokenizer(path)
    ids = [chat_ids(tokenizer, p) for p in prompts]
    engine = load_engine(
        EngineConfig(path=str(path), device=args.device, max_batch_size=total, seed=args.seed,
                     cpu_threads=args.cpu_threads, max_model_len=max(map(len, ids)) + args.max_tokens + 64),
        TrainConfig(lr=args.lr, micro_batch_size=args.micro_batch, max_samples=total, grpo_n=args.group_size,
                    batch_size=args.groups, gradient_checkpointing=args.gradient_checkpointing))
    try:
        if args.ignore_eos:
            engine.eos_ids.clear()  # benchmark only: the generators hold this very set, so no row stops early
        gen_s, train_s, step_s, lengths = [], [], [], []
        for step in range(args.warmup_steps + args.steps):
            sync(args.device)
            t0 = time.perf_counter()
            futures = [(g, engine.submit(ids[g], SamplingParams(max_tokens=args.max_tokens, temperature=1.0)))
                       for g in range(args.groups) for _ in range(args.group_size)]
            gens = [(g, f.result()) for g, f in futures]
            t1 = time.perf_counter()
            rewards = [reward_of(gen.token_ids) for _, gen in gens]
            adv = grpo_advantages([str(g) for g, _ in gens], rewards)
            samples = []
            for (g, gen), a in zip(gens, adv.values, strict=True):
                turn = Turn(prompt_ids=ids[g], response_ids=gen.token_ids, response_logprobs=gen.logprobs,
                            weight_version=gen.weight_version)
                samples += build_samples([turn], task_id=str(g), advantage=a)
            metrics = engine.train(samples)
            sync(args.device)
            t2 = time.perf_counter()
            if step >= args.warmup_steps:
                gen_s.append(t1 - t0)
                train_s.append(t2 - t1)
                step_s.append(t2 - t0)
                lengths.append(sum(len(gen.token_ids) for _, gen in gens) / len(gens))
        return {"step_s": round(statistics.median(step_s), 3), "generate_s": round(statistics.median(gen_s), 3),
                "train_s": round(statistics.median(train_s), 3), "steps_s": [round(s, 3) for s in step_s],
                "tokens_per_step": round(statistics.mean(lengths) * total),
                "mean_completion_len": round(statistics.mean(lengths), 1),
                "generator": "paged" if engine.paged is not None else "simple", "peak_mem_gb": peak_gb(args.device),
                "last_loss_tokens": metrics.get("num_loss_tokens"), "last_nan_skipped": metrics.get("nan_skipped")}
    finally:
        engine.close()
        del engine
        free_memory(args.device)


def free_memory(device: str) -> None:
    import gc

    import torch

    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def run_trl(args: argparse.Namespace, path: Path, prompts: list[str], trl: Any, datasets: Any) -> dict[str, Any]:
    from transformers import TrainerCallback

    from vibe_rl.engine.loader import load_causal_lm, load_tokenizer, resolve_dtype

    total = args.groups * args.group_size
    cpu = args.device == "cpu"
    if cpu:
        import torch

        torch.set_num_threads(args.cpu_threads)  # as the vibe-rl engine does (see --cpu-threads)
    model = load_causal_lm(path, args.device, resolve_dtype("auto", args.device))
    tokenizer = load_tokenizer(path)
    config = trl.GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="grpo-vs-trl-out-"), beta=0.0, use_vllm=False,
        num_generations=args.group_size, per_device_train_batch_size=args.micro_batch,
        gradient_accumulation_steps=total // args.micro_batch,  # one optimiser step = one generation batch
        max_completion_length=args.max_tokens, learning_rate=args.lr, max_grad_norm=1.0, weight_decay=0.0,
        temperature=1.0, top_p=1.0, num_iterations=1, loss_type="dapo", scale_rewards="group",
        gradient_checkpointing=args.gradient_checkpointing, bf16=not cpu, use_cpu=cpu, seed=args.seed,
        use_transformers_continuous_batching=args.trl_continuous_batching,
        max_steps=args.warmup_steps + args.steps, report_to="none", logging_strategy="no", save_strategy="no",
        disable_tqdm=True, log_completions=False, dataloader_num_workers=0,
        generation_kwargs={"min_new_tokens": args.max_tokens} if args.ignore_eos else None)
    dataset = datasets.Dataset.from_dict({"prompt": [[{"role": "user", "content": p}] for p in prompts]})
    lengths: list[float] = []

    def reward(prompts: list, completions: list, completion_ids: list[list[int]], **_: Any) -> list[float]:
        lengths.append(sum(len(c) for c in completion_ids) / max(len(completion_ids), 1))
        return [reward_of(c) for c in completion_ids]

    class Timer(TrainerCallback):
        def __init__(self) -> None:
            self.begin, self.steps = 0.0, []

        def on_step_begin(self, *a: Any, **k: Any) -> None:
            sync(args.device)
            self.begin = time.perf_counter()

        def on_step_end(self, *a: Any, **k: Any) -> None:
            sync(args.device)
            self.steps.append(time.perf_counter() - self.begin)

    timer = Timer()
    trainer = trl.GRPOTrainer(model=model, reward_funcs=reward, args=config, train_dataset=dataset,
                              processing_class=tokenizer, callbacks=[timer])
    gen_times: list[float] = []
    seen_prompts: set[tuple[int, ...]] = set()
    generate = trainer._generate_single_turn  # wrapped only to time it and to see the prompt ids

    def timed_generate(prompt_ids: list[list[int]], *a: Any, **k: Any) -> Any:
        seen_prompts.update(tuple(int(t) for t in p) for p in prompt_ids)
        sync(args.device)
        t0 = time.perf_counter()
        out = generate(prompt_ids, *a, **k)
        sync(args.device)
        gen_times.append(time.perf_counter() - t0)
        return out

    trainer._generate_single_turn = timed_generate
    try:
        trainer.train()
        if len(timer.steps) != args.warmup_steps + args.steps:
            raise RuntimeError(f"TRL ran {len(timer.steps)} optimiser steps, expected {args.warmup_steps + args.steps}")
        timed, w = timer.steps[args.warmup_steps:], args.warmup_steps
        gens = gen_times[w:] if len(gen_times) == len(timer.steps) else []
        return {"step_s": round(statistics.median(timed), 3),
                "generate_s": round(statistics.median(gens), 3) if gens else None,
                "train_s": round(statistics.median(timed) - statistics.median(gens), 3) if gens else None,
                "steps_s": [round(s, 3) for s in timed],
                "tokens_per_step": round(statistics.mean(lengths[w:]) * total),
                "mean_completion_len": round(statistics.mean(lengths[w:]), 1),
                "peak_mem_gb": peak_gb(args.device), "same_prompt_ids": seen_prompts == {tuple(chat_ids(tokenizer, p)) for p in prompts}}
    finally:
        del trainer, model
        free_memory(args.device)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="1.5b", help="tiny (the offline tiny model, for CPU) or 0.5b..14b")
    ap.add_argument("--vocab", default="tokenizer", choices=["tokenizer", "qwen"],
                    help="random-model vocabulary: the tiny tokenizer's (ids decode) or Qwen's 151,936")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--groups", type=int, default=8, help="GRPO groups (distinct prompts) per step")
    ap.add_argument("--group-size", type=int, default=8, help="completions per prompt")
    ap.add_argument("--max-tokens", type=int, default=256, help="completion tokens")
    ap.add_argument("--micro-batch", type=int, default=8, help="sequences per forward/backward (both sides)")
    ap.add_argument("--lr", type=float, default=1e-6)
    ap.add_argument("--gradient-checkpointing", action="store_true", help="on both sides (TRL's default is on)")
    ap.add_argument("--ignore-eos", action=argparse.BooleanOptionalAction, default=True,
                    help="generate exactly --max-tokens on both sides (default on)")
    ap.add_argument("--warmup-steps", type=int, default=1)
    ap.add_argument("--steps", type=int, default=3, help="timed steps per side (median reported)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cpu-threads", type=int, default=1,
                    help="CPU only: torch threads on both sides (a tiny model is fastest on one)")
    ap.add_argument("--trl-continuous-batching", action="store_true",
                    help="TRL generates with transformers' continuous batching instead of HF generate (default off)")
    ap.add_argument("--only", choices=["both", "vibe", "trl"], default="both", help="run one side only")
    args = ap.parse_args()
    total = args.groups * args.group_size
    args.micro_batch = min(args.micro_batch, total)
    if total % args.micro_batch or args.group_size < 2 or args.steps < 1:
        ap.error("groups x group-size must be a multiple of --micro-batch, --group-size >= 2 and --steps >= 1")

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded; fail fast instead of timing out
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")  # TRL's trainers ping the hub otherwise
    trl = datasets = None
    if args.only != "vibe":
        try:
            import datasets
            import trl
        except ImportError as exc:
            sys.exit(f"grpo_vs_trl needs TRL and datasets ({exc}). Install them with: pip install trl datasets "
                     "(or run with --only vibe).")

    import torch
    import transformers

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("--device cuda but no CUDA device is visible; use --device cpu (with --shape tiny).")
    if args.device not in ("cpu", "cuda", "cuda:0"):
        sys.exit("Use --device cpu or cuda (TRL's Trainer takes the first visible GPU; pick another one with "
                 "CUDA_VISIBLE_DEVICES).")
    path, params = build_model(args)
    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(args.groups)]
    out: dict[str, Any] = {
        "shape": args.shape, "params": params, "device": args.device,
        "gpu": torch.cuda.get_device_name() if args.device.startswith("cuda") else None,
        "groups": args.groups, "group_size": args.group_size, "max_tokens": args.max_tokens,
        "micro_batch": args.micro_batch, "gradient_checkpointing": args.gradient_checkpointing,
        "ignore_eos": args.ignore_eos, "warmup_steps": args.warmup_steps, "steps": args.steps,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "trl": getattr(trl, "__version__", None), "datasets": getattr(datasets, "__version__", None)},
    }
    with contextlib.redirect_stdout(sys.stderr):  # what the libraries print (TRL's train summary) stays off stdout
        if args.only != "trl":
            peak_gb(args.device, reset=True)
            out["vibe_rl"] = run_vibe(args, path, prompts)
        if args.only != "vibe":
            peak_gb(args.device, reset=True)
            out["trl"] = run_trl(args, path, prompts, trl, datasets)
    if "vibe_rl" in out and "trl" in out:
        out["vibe_rl_step_s"], out["trl_step_s"] = out["vibe_rl"]["step_s"], out["trl"]["step_s"]
        out["ratio"] = round(out["vibe_rl_step_s"] / out["trl_step_s"], 3)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
