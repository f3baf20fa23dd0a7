"""How one batch is dealt over the ranks, and the launcher's command line (no processes started)."""

from __future__ import annotations

import subprocess
import sys

from tests.distributed.batches import batch
from vibe_rl.engine.distributed import torchrun_argv
from vibe_rl.engine.sharding import split_batch


def runs(shard, kl_on=False):
    return [s for s in shard if kl_on or s.advantage != 0.0]


def test_every_rank_runs_the_same_number_of_sequences_and_no_sample_is_lost():
    samples = batch(3, n=11)
    split = split_batch(samples, world=4, max_len=256, max_samples=256, kl_on=False, pad_id=0)
    counts = {len(runs(shard)) for shard in split.shards}
    assert len(counts) == 1  # the same number of forward/backward passes on every rank
    real = [s for shard in split.shards for s in shard if s.episode_id != "padding"]
    assert sorted(s.episode_id for s in real) == sorted(s.episode_id for s in samples)
    assert sum(split.padding) == sum(1 for shard in split.shards for s in shard if s.episode_id == "padding")
    assert all(s.num_loss_tokens == 0 for shard in split.shards for s in shard if s.episode_id == "padding")
    assert split.total_tokens == sum(s.num_loss_tokens for s in samples)


def test_caps_and_truncation_are_counted_once_for_the_whole_batch():
    samples = batch(4, n=10)
    split = split_batch(samples, world=2, max_len=12, max_samples=8, kl_on=True, pad_id=0)
    assert split.dropped_samples == 2 and len(split.samples) == 8
    assert split.truncated_samples == sum(1 for s in samples[:8] if len(s.input_ids) > 12)
    assert all(len(s.input_ids) <= 12 for shard in split.shards for s in shard)


def test_torchrun_command_runs_the_same_cli_on_each_rank():
    argv = torchrun_argv(["swarm", "start", "--port", "9000"], 4, 2, 1, "10.0.0.1", 29500, "/py")
    assert argv[:3] == ["/py", "-m", "torch.distributed.run"]
    assert {"--nproc-per-node=4", "--nnodes=2", "--node-rank=1", "--master-addr=10.0.0.1",
            "--master-port=29500"} <= set(argv)
    assert argv[-6:] == ["--module", "vibe_rl", "swarm", "start", "--port", "9000"]


def test_a_node_rank_outside_the_group_is_refused_with_the_fix():
    proc = subprocess.run([sys.executable, "-m", "vibe_rl", "swarm", "start", "--nnodes", "2", "--node-rank", "2",
                           "--master-port", "29999"], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "--node-rank 2 must be below --nnodes 2" in proc.stderr, proc.stderr


def test_a_server_pinned_to_cpu_starts_one_process_unless_told(tmp_path):
    from vibe_rl.cli.ranks import forces_cpu

    config = tmp_path / "job.yaml"
    config.write_text("model:\n  device: cpu\n")
    assert forces_cpu(["model.device=cpu"], None) and forces_cpu([], str(config))
    assert not forces_cpu(["model.device=auto"], None) and not forces_cpu([], None)
