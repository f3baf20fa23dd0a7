"""Training scores loss tokens in chunks of rows, each recomputed in the backward pass: the values and
gradients must be those of one call on all rows (rows are independent), with and without top-p."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from vibe_rl.rl import logprobs  # noqa: E402


@pytest.mark.parametrize("top_p", [1.0, 0.8])
def test_chunked_scores_equal_one_call(monkeypatch, top_p):
    gen = torch.Generator().manual_seed(0)
    n, vocab = 37, 50
    base = torch.randn(n, vocab, generator=gen)
    targets = torch.randint(0, vocab, (n,), generator=gen)
    temps = torch.rand(n, generator=gen) + 0.5
    tops = torch.full((n,), top_p)

    def run(chunk: int):
        monkeypatch.setattr(logprobs, "CHUNK_ROWS", chunk)
        logits = base.clone().requires_grad_(True)
        out = logprobs.token_logprobs(logits, targets, temps, tops)
        (out * torch.linspace(-1, 1, n)).sum().backward()
        return out.detach(), logits.grad

    whole, whole_grad = run(10_000)
    chunked, chunked_grad = run(8)  # 5 chunks, the last one short
    assert torch.equal(whole, chunked) or torch.allclose(whole, chunked, rtol=0, atol=1e-6)
    assert torch.allclose(whole_grad, chunked_grad, rtol=0, atol=1e-6)
    assert torch.isfinite(whole).all() and whole_grad.abs().sum() > 0


def test_no_chunks_without_gradients(monkeypatch):
    monkeypatch.setattr(logprobs, "CHUNK_ROWS", 2)
    logits = torch.randn(9, 20)
    with torch.no_grad():
        out = logprobs.token_logprobs(logits, torch.zeros(9, dtype=torch.long), torch.ones(9), torch.ones(9))
    assert out.shape == (9,) and not out.requires_grad
