"""How one batch is dealt over the ranks, and the launcher's command line (no processes started)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.distributed.batches import batch
from vibe_rl.engine.distributed import torchrun_argv
from vibe_rl.engine.sharding import split_batch
from vibe_rl.rl.batch import micro_batches


def runs(shard, kl_on=False):
    return [s for s in shard if kl_on or s.advantage != 0.0]


def passes_per_rank(split, size: int, tokens: int = 0) -> list[int]:
    """How many micro-batches each rank's grpo_step cuts its shard into (what FSDP needs equal)."""
    return [len(micro_batches(runs(shard), size, tokens, split.passes)) for shard in split.shards]


@pytest.mark.parametrize("size,tokens", [(2, 0), (3, 0), (4, 64), (1, 40), (8, 5)])
def test_every_rank_runs_the_same_number_of_passes_and_no_sample_is_lost(size, tokens):
    samples = batch(3, n=11)
    split = split_batch(samples, world=4, max_len=256, max_samples=256, kl_on=False, pad_id=0,
                        micro_batch_size=size, micro_batch_tokens=tokens)
    assert passes_per_rank(split, size, tokens) == [split.passes] * 4 and split.passes > 0
    real = [s for shard in split.shards for s in shard if s.episode_id != "padding"]
    assert sorted(s.episode_id for s in real) == sorted(s.episode_id for s in samples)
    assert sum(split.padding) == sum(1 for shard in split.shards for s in shard if s.episode_id == "padding")
    assert all(s.num_loss_tokens == 0 for shard in split.shards for s in shard if s.episode_id == "padding")
    assert split.total_tokens == sum(s.num_loss_tokens for s in samples)


def test_a_token_budget_shared_unevenly_still_gives_equal_passes():
    """Long sequences (one per pass under the budget) and short ones (many per pass) dealt over 2 ranks:
    a rank with fewer passes halves its fullest ones until both run as many; nothing lost, no padding."""
    from vibe_rl.rl.samples import Sample

    def sample(n, i):
        return Sample([5] * n, [0] + [1] * (n - 1), [0.0] + [-1.0] * (n - 1), advantage=1.0, episode_id=f"e{i}")

    samples = [sample(100, i) for i in range(3)] + [sample(4, 10 + i) for i in range(8)]
    split = split_batch(samples, world=2, max_len=256, max_samples=256, kl_on=False, pad_id=0,
                        micro_batch_size=1, micro_batch_tokens=120)
    assert passes_per_rank(split, 1, 120) == [split.passes] * 2
    assert sum(split.padding) == 0
    assert sorted(s.episode_id for shard in split.shards for s in shard) == sorted(s.episode_id for s in samples)


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
