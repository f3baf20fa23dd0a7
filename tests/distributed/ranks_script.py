"""Run under torchrun (2 processes, gloo): the server's sharded engine on fixed batches.

Rank 0 drives a `DistributedEngine` (what the swarm server's rank 0 holds); rank 1 runs
`worker_loop` (what every other rank of a server runs). For each scenario: two GRPO steps
with a checkpoint written after the first; then a checkpoint written by a single process
(--from-single) is resumed here and stepped once; then a batch whose loss is not finite on one
rank only (its logits are) is skipped, and two clean steps follow. Rank 0 writes the losses, the
final weights and how many gradient reduce-scatters each step issued (FSDP2 calls
`torch.distributed.reduce_scatter_single`; rank 0 counts its calls and passes them through).
VIBE_RL_GRAD_SYNC in the environment picks the sync mode; --only NAME runs one scenario.

    python -m torch.distributed.run --nproc-per-node 2 tests/distributed/ranks_script.py MODEL OUT \
        --from-single CKPT --poisoned MODEL_WITH_A_NAN_EMBEDDING
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.distributed.batches import SCENARIOS, batch, configs, nan_loss_batch, poisoned_batch  # noqa: E402
from vibe_rl.engine import distributed, load_engine  # noqa: E402
from vibe_rl.engine.dist_engine import worker_loop  # noqa: E402
from vibe_rl.engine.fsdp import _fsdp_modules  # noqa: E402

REDUCE_SCATTERS = [0]


def count_reduce_scatters() -> None:
    """Count this process's calls of the collective FSDP2 reduces gradients with (and make them)."""
    import torch.distributed as dist

    real = dist.reduce_scatter_single

    def counted(*args, **kwargs):
        REDUCE_SCATTERS[0] += 1
        return real(*args, **kwargs)

    dist.reduce_scatter_single = counted


def counted_train(engine, samples) -> tuple[dict, dict]:
    """engine.train(samples) -> (metrics, what the step reduced: calls, synced backwards, mode, FSDP groups)."""
    before = REDUCE_SCATTERS[0]
    metrics = engine.train(samples)
    trainer = engine.state.trainer
    return metrics, {"reduce_scatters": REDUCE_SCATTERS[0] - before, "synced_backwards": trainer.last_grad_syncs,
                     "mode": trainer.last_sync_mode, "fsdp_groups": len(_fsdp_modules(trainer.model))}


def main() -> None:
    import torch

    model_path, out = sys.argv[1], Path(sys.argv[2])
    options = dict(zip(sys.argv[3::2], sys.argv[4::2], strict=False))
    from_single = Path(options["--from-single"]) if "--from-single" in options else None
    env = distributed.init_from_env("cpu")
    count_reduce_scatters()
    if env.rank != 0:
        worker_loop(env)
        distributed.shutdown()
        return
    results: dict = {"world_size": env.world_size}
    try:
        for name in [options["--only"]] if "--only" in options else SCENARIOS:
            engine_cfg, train_cfg = configs(model_path, name)
            with load_engine(engine_cfg, train_cfg) as engine:
                first, sync1 = counted_train(engine, batch(1))
                engine.save(out / f"{name}-step1")
                second, sync2 = counted_train(engine, batch(2))
                weights = {n: p.detach().clone() for n, p in engine.local.model.named_parameters()
                           if "lora_" in n or not engine.lora}
                torch.save(weights, out / f"{name}-weights.pt")
                results[name] = {"losses": [first["loss"], second["loss"]],
                                 "grad_norms": [first["grad_norm"], second["grad_norm"]],
                                 "versions": [first["version"], second["version"]],
                                 "padding": first["padding_samples"] + second["padding_samples"],
                                 "devices": engine.devices, "sync": [sync1, sync2]}
        if from_single is not None:
            engine_cfg, train_cfg = configs(model_path, "full")
            with load_engine(engine_cfg, train_cfg) as engine:
                engine.load(from_single)
                resumed = engine.train(batch(2))
                results["from_single"] = {"loss": resumed["loss"], "version": resumed["version"]}
        if "--only" not in options:  # one rank's loss is NaN, its logits finite: every rank skips, none hangs
            engine_cfg, train_cfg = configs(model_path, "full")
            with load_engine(engine_cfg, train_cfg) as engine:
                bad, sync = counted_train(engine, nan_loss_batch())
                clean = [engine.train(batch(1)), engine.train(batch(2))]
                results["nan_loss"] = {"skipped": bad["nan_skipped"], "version_after": bad["version"], "sync": sync,
                                       "clean_losses": [m["loss"] for m in clean]}
        if "--poisoned" in options:  # one rank's share has non-finite logits: every rank skips, none hangs
            engine_cfg, train_cfg = configs(options["--poisoned"], "full")
            with load_engine(engine_cfg, train_cfg) as engine:
                bad = engine.train(poisoned_batch())
                good = engine.train(batch(2))
                results["poisoned"] = {"skipped": bad["nan_skipped"], "version_after": bad["version"],
                                       "clean_loss": good["loss"], "clean_version": good["version"]}
    finally:
        (out / "result.json").write_text(json.dumps(results, indent=2))
        env.broadcast(("exit",))
        distributed.shutdown()


if __name__ == "__main__":
    main()
    distributed.end_process()  # no interpreter finalization: see end_process
