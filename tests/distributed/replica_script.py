"""Run under torchrun (2 processes): does every rank's generation replica answer like rank 0's, and
does the sharded trainer score the replicas' answers with their own logprobs (on-policy)?

Rank 0 drives a `DistributedEngine` (rank 1 runs `worker_loop`); fp32, so only float rounding may
differ. Each seeded request runs alone (no batch effects) on rank 0's replica and on rank 1's;
then one GRPO step trains on rank 1's answers (sampled from the weights the trainer holds: its
`logprob_abs_diff` is the replica-vs-trainer gap), and the requests run again on the new weights.
Rank 0 writes OUT/replicas.json.

    python -m torch.distributed.run --nproc-per-node 2 tests/distributed/replica_script.py MODEL OUT DEVICE
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from vibe_rl.engine import distributed, load_engine  # noqa: E402
from vibe_rl.engine.base import SamplingParams  # noqa: E402
from vibe_rl.engine.dist_engine import worker_loop  # noqa: E402

PROMPTS = [[5 + i, 17, 29, 41 + 2 * i, 8] for i in range(6)]


def answers(target) -> list:
    """Each prompt alone on `target` (a replica: local engine or remote), seeded."""
    return [target.submit(p, SamplingParams(max_tokens=8, seed=1000 + i)).result(timeout=300)
            for i, p in enumerate(PROMPTS)]


def compare(a: list, b: list) -> dict:
    same = [x.token_ids == y.token_ids for x, y in zip(a, b, strict=True)]
    gap = max((abs(p - q) for x, y in zip(a, b, strict=True) if x.token_ids == y.token_ids
               for p, q in zip(x.logprobs, y.logprobs, strict=True)), default=0.0)
    return {"same_tokens": sum(same), "requests": len(same), "max_logprob_gap": gap}


def main() -> None:
    from vibe_rl.rl.samples import Sample
    from vibe_rl.schema import EngineConfig, TrainConfig

    model_path, out, device = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    env = distributed.init_from_env(device)
    if env.rank != 0:
        worker_loop(env)
        distributed.shutdown()
        return
    result: dict = {"devices": None}
    try:
        cfg = EngineConfig(path=model_path, device=device, dtype="float32", max_model_len=128)
        with load_engine(cfg, TrainConfig(lr=0.03, micro_batch_size=2)) as engine:
            result["devices"] = engine.devices
            local, remote = answers(engine.local), answers(engine.remotes[0])
            result["before"] = compare(local, remote)
            samples = [Sample(p + g.token_ids, [0] * len(p) + [1] * len(g.token_ids), [0.0] * len(p) + g.logprobs,
                              advantage=1.0 if i % 2 else -1.0, task_id="t")
                       for i, (p, g) in enumerate(zip(PROMPTS, remote, strict=True))]
            metrics = engine.train(samples)
            result["train"] = {k: metrics[k] for k in ("loss", "logprob_abs_diff", "nan_skipped")}
            result["after"] = compare(answers(engine.local), answers(engine.remotes[0]))
    finally:
        (out / "replicas.json").write_text(json.dumps(result, indent=2))
        env.broadcast(("exit",))
        distributed.shutdown()


if __name__ == "__main__":
    main()
    distributed.end_process()  # no interpreter finalization: see end_process
