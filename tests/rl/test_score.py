"""`score` projects only the scored positions onto the vocabulary, and gives the log-probs (and gradients) that the
full logits give, for a model with `logits_to_keep` and for one without it."""

from __future__ import annotations

import pytest

from vibe_rl.rl.batch import _FULL_LOGITS, collate, score
from vibe_rl.rl.samples import Sample

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def rows() -> list[Sample]:
    """Rows of different lengths whose answers sit at different offsets, one with two answers (a merged episode)."""
    shapes = [(30, [(20, 26)]), (12, [(4, 12)]), (41, [(10, 14), (33, 41)])]
    out = []
    for i, (n, spans) in enumerate(shapes):
        mask = [0] * n
        for a, b in spans:
            mask[a:b] = [1] * (b - a)
        ids = [(7 * i + 3 * k) % 200 + 5 for k in range(n)]
        out.append(Sample(ids, mask, [-1.0] * n, advantage=1.0, temperature=0.7, top_p=0.9, episode_id=f"e{i}"))
    return out


class FullOnly(torch.nn.Module):
    """The same model behind a forward that knows nothing of `logits_to_keep`."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, input_ids, attention_mask):
        return self.inner(input_ids=input_ids, attention_mask=attention_mask)


def full_score(model, batch):
    """The reference: every position's logits, then the scored ones."""
    from vibe_rl.rl.logprobs import token_logprobs

    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    mask = batch["loss_mask"][:, 1:]
    shape = mask.shape
    return token_logprobs(logits[:, :-1][mask], batch["input_ids"][:, 1:][mask],
                          batch["temperature"][:, None].expand(shape)[mask],
                          batch["top_p"][:, None].expand(shape)[mask])


def test_kept_logits_give_the_full_logits_log_probs_and_gradients(tiny_model_dir):
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    batch = collate(rows(), pad_id=0, device="cpu")
    seen = []
    handle = model.lm_head.register_forward_hook(lambda _m, inputs, _out: seen.append(inputs[0].shape))
    logp, mask = score(model, batch)
    handle.remove()
    written = int(batch["loss_mask"][:, 1:].sum())
    positions = int(batch["loss_mask"][:, 1:].any(dim=0).sum())
    # the head ran on the positions some row is scored at, not on all 41
    assert seen == [torch.Size([3, positions, model.config.hidden_size])] and positions < 40
    assert logp.shape == (written,) and mask.shape == (3, 40)
    logp.sum().backward()
    kept_grad = model.model.layers[0].mlp.up_proj.weight.grad.clone()
    model.zero_grad()
    reference = full_score(model, batch)
    reference.sum().backward()
    assert torch.allclose(logp, reference, atol=1e-5)
    assert torch.allclose(kept_grad, model.model.layers[0].mlp.up_proj.weight.grad, atol=1e-5)
    assert type(model) not in _FULL_LOGITS


def test_a_model_without_logits_to_keep_falls_back_to_the_full_logits(tiny_model_dir):
    inner = transformers.AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    batch = collate(rows(), pad_id=0, device="cpu")
    with torch.no_grad():
        logp, _ = score(FullOnly(inner), batch)
        assert FullOnly in _FULL_LOGITS  # found out once, then not tried again
        again, _ = score(FullOnly(inner), batch)
        assert torch.allclose(logp, full_score(inner, batch), atol=1e-5) and torch.equal(logp, again)


def test_a_row_without_written_tokens_is_scored_to_nothing(tiny_model_dir):
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    blank = Sample([5, 6, 7], [0, 0, 0], [0.0] * 3, advantage=0.0, episode_id="blank")
    with torch.no_grad():
        logp, mask = score(model, collate([blank], pad_id=0, device="cpu"))
    assert logp.shape == (0,) and not mask.any()
