"""Where a paged decode step spends its time: graph replay, host overhead, and the kernels inside.

    python benchmarks/profile_decode.py --shape 7b --batch 64 --context 320
    python benchmarks/profile_decode.py --shape 0.5b --batch 16 --context 2048 --kernels-only

For one (batch, context) bucket of the paged runner it measures, each the median over
`--repeats` steps:
- `replay_ms`: the captured decode + sampling graph alone (CUDA events around replays);
- `step_ms`: a whole `PagedModel.decode` call as the generator makes it (host tensors in,
  replay, token ids back on the host): `step_ms - replay_ms` is the host's share;
- `kernels`: the eager step under the profiler: kernels per step and the costliest kernel
  families (summed GPU time per step);
- `torch_ops_*`: the same step with the fused Triton kernels off (plain torch ops, the
  blocks gathered into a dense tensor for attention), unless `--kernels-only`.
Prints ONE JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="7b")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--context", type=int, default=320, help="tokens already in each sequence's cache")
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--top", type=int, default=14, help="kernel families to list")
    ap.add_argument("--kernels-only", action="store_true", help="skip the plain-torch-ops comparison")
    args = ap.parse_args()

    import torch

    from vibe_rl.engine import load_engine
    from vibe_rl.engine.shapes import build_random_model
    from vibe_rl.schema import EngineConfig

    path = tempfile.mkdtemp(prefix="vibe-rl-prof-")
    build_random_model(args.shape, path, device="cuda")
    eng = load_engine(EngineConfig(path=path, device="cuda", generator="paged", max_batch_size=args.batch,
                                   max_model_len=args.context + 512), trainable=False)
    runner = eng.paged.runner
    bs = runner.block_size
    nb = -(-(args.context + 1) // bs)
    for r in range(args.batch):  # private blocks per row, as after admission
        runner.set_table(r, list(range(1 + r * nb, 1 + (r + 1) * nb)))
    ids = [(7 * r + 11) % 1000 + 300 for r in range(args.batch)]
    pos, rows = [args.context] * args.batch, list(range(args.batch))
    params, seeds = [[1.0] * args.batch, [1.0] * args.batch], [list(range(args.batch)), [0] * args.batch]
    out: dict = {"shape": args.shape, "batch": args.batch, "context": args.context}

    def timed_replays(graph) -> float:
        times = []
        for _ in range(args.repeats):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            graph.replay()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        return round(statistics.median(times), 3)

    def measure(tag: str) -> None:
        with torch.inference_mode():
            runner.decode(ids, pos, rows, params, seeds, "fast").result()  # capture
            graph = next(iter(runner._graphs.values())).graph
            out[f"{tag}_replay_ms"] = timed_replays(graph)
            steps = []
            for _ in range(args.repeats):
                t = time.perf_counter()
                runner.decode(ids, pos, rows, params, seeds, "fast").result()
                steps.append((time.perf_counter() - t) * 1e3)
            out[f"{tag}_step_ms"] = round(statistics.median(steps), 3)
        out[f"{tag}_tok_s_at_step"] = round(args.batch / out[f"{tag}_step_ms"] * 1e3)

    measure("graph")
    # The eager step under the profiler: what the graph replays, kernel by kernel.
    nblk = min(runner.max_blocks, 1 << max(4, (nb - 1).bit_length()))
    bucket = next(iter(runner._graphs))[0]
    inp = torch.zeros(6, bucket, dtype=torch.long, device="cuda")
    inp[5] = -1  # every row's token comes from inp[0]
    inp[0, :args.batch], inp[1, :args.batch] = torch.tensor(ids), args.context
    inp[2] = runner.max_rows
    inp[2, :args.batch] = torch.arange(args.batch)
    prm = torch.ones(2, bucket, device="cuda")
    from torch.profiler import ProfilerActivity, profile

    with torch.inference_mode():
        for _ in range(2):
            runner._step(inp, prm, nblk, "fast")
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                runner._step(inp, prm, nblk, "fast")
            torch.cuda.synchronize()
    families: dict[str, list[float]] = {}
    for ev in prof.key_averages():
        if ev.device_type.name != "CUDA" and getattr(ev, "self_device_time_total", 0) == 0:
            continue
        name = ev.key[:60]
        fam = families.setdefault(name, [0, 0.0])
        fam[0] += ev.count / 5
        fam[1] += getattr(ev, "self_device_time_total", 0) / 5 / 1e3
    kernels = sorted(families.items(), key=lambda kv: -kv[1][1])
    out["eager_kernels_per_step"] = round(sum(c for c, _ in families.values()))
    out["eager_kernel_ms_per_step"] = round(sum(t for _, t in families.values()), 3)
    out["top_kernels"] = [[name, round(c), round(t, 3)] for name, (c, t) in kernels[:args.top]]

    out["fused_kernels"] = runner.kernels is not None
    if runner.kernels is not None and not args.kernels_only:  # the same step on plain torch ops, for comparison
        print(json.dumps(out), file=sys.stderr, flush=True)  # what was measured so far, should the rest fail
        eng.close()
        del eng, runner
        torch.cuda.empty_cache()
        eng = load_engine(EngineConfig(path=path, device="cuda", generator="paged", max_batch_size=args.batch,
                                       max_model_len=args.context + 512, fused_kernels=False), trainable=False)
        runner = eng.paged.runner
        for r in range(args.batch):
            runner.set_table(r, list(range(1 + r * nb, 1 + (r + 1) * nb)))
        measure("torch_ops")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
