"""Run under torchrun (2 processes, gloo): a sharded engine with `model.generation_replicas: off`.

Rank 0 drives a `DistributedEngine` that serves the sharded training model itself (rank 1 runs
`worker_loop` and joins each generation pass). Per scenario (full, LoRA): seeded requests, batched
together; one GRPO step on the answers; the same requests again; a checkpoint written with the
weights gathered from the shards. Rank 0 writes OUT/<scenario>.json (tokens, logprobs, the loss,
whether each rank kept a replica) and OUT/<scenario>-ckpt.

    python -m torch.distributed.run --nproc-per-node 2 tests/distributed/gathered_script.py MODEL OUT [DEVICE]

DEVICE: cpu (default; gloo) or cuda (NCCL, one GPU per rank, fp32 so answers compare exactly).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from vibe_rl.engine import distributed, load_engine  # noqa: E402
from vibe_rl.engine.base import SamplingParams  # noqa: E402
from vibe_rl.engine.dist_engine import worker_loop  # noqa: E402

PROMPTS = [[5 + i, 17, 29, 41 + 2 * i, 8] for i in range(4)]
SCENARIOS = {"full": 0, "lora": 4}  # name -> LoRA rank


def configs(model_path: str, lora_rank: int, replicas: str = "off", device: str = "cpu"):
    from vibe_rl.schema import EngineConfig, LoraConfig, TrainConfig

    return (EngineConfig(path=model_path, device=device, dtype="float32", max_model_len=64, generator="simple",
                         seed=0, lora=LoraConfig(rank=lora_rank, alpha=8), generation_replicas=replicas),
            TrainConfig(lr=1e-2, micro_batch_size=2))


def play(engine) -> list[dict]:
    """The prompts submitted together (one batch where they meet), each seeded."""
    futures = [engine.submit(p, SamplingParams(max_tokens=6, seed=100 + i)) for i, p in enumerate(PROMPTS)]
    return [{"tokens": g.token_ids, "logprobs": g.logprobs, "version": g.weight_version}
            for g in (f.result(timeout=300) for f in futures)]


def samples(answers: list[dict]) -> list:
    from vibe_rl.rl.samples import Sample

    return [Sample(p + a["tokens"], [0] * len(p) + [1] * len(a["tokens"]), [0.0] * len(p) + a["logprobs"],
                   advantage=1.0 if i % 2 else -0.5, task_id="t", episode_id=f"e{i}")
            for i, (p, a) in enumerate(zip(PROMPTS, answers, strict=True))]


def run(model_path: str, lora_rank: int, out: Path, name: str, device: str) -> dict:
    engine_cfg, train_cfg = configs(model_path, lora_rank, device=device)
    with load_engine(engine_cfg, train_cfg) as engine:
        before = play(engine)
        metrics = engine.train(samples(before))
        after = play(engine)
        engine.save(out / f"{name}-ckpt")
        return {"before": before, "after": after, "loss": metrics["loss"], "ratio_mean": metrics["ratio_mean"],
                "logprob_abs_diff": metrics["logprob_abs_diff"], "gathered": engine.gathered,
                "remotes": len(engine.remotes)}


def main() -> None:
    model_path, out = sys.argv[1], Path(sys.argv[2])
    device = sys.argv[3] if len(sys.argv) > 3 else "cpu"
    env = distributed.init_from_env(device)
    if env.rank != 0:
        worker_loop(env)
        distributed.shutdown()
        return
    try:
        for name, rank in SCENARIOS.items():
            (out / f"{name}.json").write_text(json.dumps(run(model_path, rank, out, name, device)))
    finally:
        env.broadcast(("exit",))
        distributed.shutdown()


if __name__ == "__main__":
    main()
    distributed.end_process()  # no interpreter finalization: see end_process
