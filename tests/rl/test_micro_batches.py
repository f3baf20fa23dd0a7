"""How one update's samples are cut into micro-batches, and that the cut does not change the update."""

from __future__ import annotations

import random

import pytest

from vibe_rl.rl.batch import micro_batches
from vibe_rl.rl.samples import Sample


def samples(lengths: list[int]) -> list[Sample]:
    return [Sample([7] * n, [0] + [1] * (n - 1), [0.0] + [-1.0] * (n - 1), advantage=1.0, episode_id=f"e{i}")
            for i, n in enumerate(lengths)]


def ids(chunks) -> list[str]:
    return sorted(s.episode_id for chunk in chunks for s in chunk)


def test_by_count_the_chunks_are_length_sorted_and_full():
    batch = samples([9, 3, 7, 5, 1])
    chunks = micro_batches(batch, 2)
    assert [[len(s.input_ids) for s in c] for c in chunks] == [[1, 3], [5, 7], [9]]


@pytest.mark.parametrize("budget", [1, 16, 40, 100, 10_000])
def test_by_tokens_every_chunk_fits_its_budget_unless_one_sequence_is_longer(budget):
    rng = random.Random(budget)
    batch = samples([rng.randint(2, 60) for _ in range(25)])
    chunks = micro_batches(batch, 1, budget)
    assert ids(chunks) == ids([batch])
    for chunk in chunks:
        padded = len(chunk) * max(len(s.input_ids) for s in chunk)
        assert padded <= budget or len(chunk) == 1, (budget, [len(s.input_ids) for s in chunk])
    # greedy: the next chunk's first sequence would not have fitted in the one before
    for before, after in zip(chunks, chunks[1:], strict=False):
        assert (len(before) + 1) * len(after[0].input_ids) > budget


def test_the_size_is_ignored_under_a_token_budget():
    assert len(micro_batches(samples([4] * 12), 2, 48)) == 1  # 12 rows x 4 tokens


@pytest.mark.parametrize("passes", [4, 7, 12])
def test_passes_halve_the_fullest_chunks_until_there_are_enough(passes):
    batch = samples([4] * 12)
    chunks = micro_batches(batch, 1, 48, passes)
    assert len(chunks) == passes and ids(chunks) == ids([batch])
    assert max(map(len, chunks)) - min(map(len, chunks)) <= 2


def test_more_passes_than_samples_is_a_bug_in_the_caller():
    with pytest.raises(ValueError, match="3 passes need at least 3 samples"):
        micro_batches(samples([4, 4]), 1, 0, 3)


def test_a_token_budget_gives_the_update_of_fixed_size_micro_batches(make_engine):
    """The loss is summed over micro-batches and divided by the batch's loss tokens: how the batch is cut
    changes float rounding only (fp32 on CPU). Weights within 1% of the learning rate: Adam divides by
    sqrt(v), so the rounding of near-zero gradients shows in the weights more than in the loss."""
    torch = pytest.importorskip("torch")
    rng = random.Random(0)
    batch = [Sample([rng.randrange(3, 1000) for _ in range(n)], [0] * 3 + [1] * (n - 3), [0.0] * 3 + [-2.5] * (n - 3),
                    advantage=rng.choice([-1.0, 1.0]), task_id=str(i % 3), episode_id=f"e{i}")
             for i, n in enumerate(rng.randint(6, 40) for _ in range(12))]
    by_count = make_engine(lr=1e-2, micro_batch_size=2)
    by_tokens = make_engine(lr=1e-2, micro_batch_tokens=90)
    assert len(micro_batches(batch, 2)) != len(micro_batches(batch, 2, 90))
    a, b = by_count.train(batch), by_tokens.train(batch)
    assert a["loss"] == pytest.approx(b["loss"], rel=1e-5) and a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-4)
    for (name, p), (_, q) in zip(by_count.model.named_parameters(), by_tokens.model.named_parameters(), strict=True):
        assert torch.allclose(p, q, rtol=0, atol=0.01 * 1e-2), name
