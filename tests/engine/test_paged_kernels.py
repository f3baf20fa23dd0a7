"""The paged decoder's Triton kernels against plain torch (natively on a GPU; in Triton's interpreter on CPU)."""

import math
import os

import pytest
import torch

DEV = "cuda" if torch.cuda.is_available() else "cpu"
_saved = os.environ.get("TRITON_INTERPRET")
if DEV == "cpu":  # Triton's CPU interpreter; Triton reads the switch when its functions are defined
    os.environ["TRITON_INTERPRET"] = "1"
try:
    triton = pytest.importorskip("triton", reason="the kernels need Triton: pip install triton (setup.sh does)")
    from vibe_rl.engine import paged_kernels as K
finally:  # only this module's kernels are interpreted: other tests see the environment as it was
    if _saved is None:
        os.environ.pop("TRITON_INTERPRET", None)
    else:
        os.environ["TRITON_INTERPRET"] = _saved
DTYPES = [torch.float32] + ([torch.bfloat16] if DEV == "cuda" else [])


@pytest.fixture(autouse=True)
def interpreter(monkeypatch):
    """On CPU the interpreter must also be on while kernels run (and an engine built here takes them)."""
    if DEV == "cpu":
        monkeypatch.setenv("TRITON_INTERPRET", "1")


TOL = {torch.float32: 2e-5, torch.bfloat16: 2e-2}


def rel(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("heads", "kv", "d", "block"), [(14, 2, 64, 16), (4, 4, 16, 8), (8, 2, 32, 32)])
def test_paged_attention_matches_dense_attention(dtype, heads, kv, d, block):
    g = torch.Generator().manual_seed(heads * d + block)
    b, nblocks, lengths = 5, 80, [1, 17, 64, 300, 613]  # one token, a partial block, whole tiles, several splits
    k = torch.randn(kv, nblocks * block, d, generator=g).to(DEV, dtype)
    v = torch.randn(kv, nblocks * block, d, generator=g).to(DEV, dtype)
    q = torch.randn(b, heads, d, generator=g).to(DEV, dtype)
    context = 640
    width = -(-context // block)
    tables = torch.stack([torch.randperm(nblocks - 1, generator=g)[:width] + 1 for _ in range(b)]).to(DEV)
    out = K.paged_attention(q, k, v, tables, torch.tensor(lengths, device=DEV), 1 / math.sqrt(d),
                            block_size=block, context=context)
    for r, n in enumerate(lengths):
        rows = (tables[r, torch.arange(n, device=DEV) // block] * block + torch.arange(n, device=DEV) % block)
        keys = k[:, rows].float().repeat_interleave(heads // kv, 0)  # (H, n, d)
        vals = v[:, rows].float().repeat_interleave(heads // kv, 0)
        probs = torch.einsum("hd,hnd->hn", q[r].float(), keys).div(math.sqrt(d)).softmax(-1)
        want = torch.einsum("hn,hnd->hd", probs, vals)
        assert rel(out[r], want) < TOL[dtype], (r, n)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rope_store_rotates_q_and_k_and_writes_the_cache_rows(dtype):
    g = torch.Generator().manual_seed(1)
    n, heads, kv, d, slots, maxlen = 6, 4, 2, 16, 40, 50
    qkv = torch.randn(n, (heads + 2 * kv) * d, generator=g).to(DEV, dtype)
    cos, sin = torch.randn(maxlen, d, generator=g).to(DEV, dtype), torch.randn(maxlen, d, generator=g).to(DEV, dtype)
    pos = torch.tensor([0, 3, 9, 10, 49, 7], device=DEV)
    write = torch.tensor([5, 6, 30, 2, 39, 0], device=DEV)
    k = torch.zeros(kv, slots, d, dtype=dtype, device=DEV)
    v = torch.zeros_like(k)
    q = K.rope_store(qkv, cos, sin, pos, write, k, v, heads)
    x = qkv.float().view(n, heads + 2 * kv, d)
    rot = x[:, :heads + kv] * cos[pos].float()[:, None] + x[:, :heads + kv].roll(d // 2, -1) * sin[pos].float()[:, None]
    assert rel(q, rot[:, :heads]) < TOL[dtype] / 4
    assert rel(k[:, write].transpose(0, 1), rot[:, heads:]) < TOL[dtype] / 4
    assert torch.equal(v[:, write].transpose(0, 1), qkv.view(n, heads + 2 * kv, d)[:, heads + kv:])
    untouched = torch.ones(slots, dtype=torch.bool, device=DEV)
    untouched[write] = False
    assert not k[:, untouched].any() and not v[:, untouched].any()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", [64, 96])
def test_add_rms_norm_is_the_residual_and_hf_rmsnorm(dtype, cols):
    g = torch.Generator().manual_seed(cols)
    x, delta = (torch.randn(7, cols, generator=g).to(DEV, dtype) for _ in range(2))
    weight = torch.randn(cols, generator=g).to(DEV, dtype)

    def hf_norm(t):
        f = t.float()
        return weight * (f * torch.rsqrt(f.pow(2).mean(-1, keepdim=True) + 1e-6)).to(dtype)

    res, out = K.add_rms_norm(x, delta, weight, 1e-6)
    assert torch.equal(res, x + delta)
    assert rel(out, hf_norm(x + delta)) < TOL[dtype] / 4
    same, normed = K.add_rms_norm(x, None, weight, 1e-6)
    assert same is x and rel(normed, hf_norm(x)) < TOL[dtype] / 4


@pytest.mark.parametrize("dtype", DTYPES)
def test_silu_mul(dtype):
    g = torch.Generator().manual_seed(3)
    gate, up = (torch.randn(3, 1500, generator=g).to(DEV, dtype) for _ in range(2))
    assert rel(K.silu_mul(gate, up), torch.nn.functional.silu(gate) * up) < TOL[dtype] / 4


def test_the_paged_engine_with_kernels_matches_the_simple_loop(tiny_model_dir):
    """The whole decoder on the kernels (interpreted on CPU, fp32): same tokens as the simple loop,
    logprobs to float precision, and a follow-up call over a cached prefix too."""
    from vibe_rl.engine import SamplingParams, load_engine
    from vibe_rl.schema import EngineConfig

    def engine(generator, **kw):
        return load_engine(EngineConfig(path=str(tiny_model_dir), device=DEV, max_model_len=512, generator=generator,
                                        dtype="float32", **kw), trainable=False)

    simple, paged = engine("simple"), engine("paged", block_size=8, prefill_chunk=40, cuda_graphs=False)
    try:
        runner = paged.paged.runner
        assert runner.kernels is K and runner._fused_layers is not None, "the kernel decoder must be the one tested"
        tok = paged.tokenizer
        ps = [tok.encode(tok.apply_chat_template([{"role": "user", "content": f"Player {i}: describe your word."}],
                                                 add_generation_prompt=True, tokenize=False)) for i in range(3)]
        # submitted together: one prefill chunk holds several sequences' tokens, decode steps several rows
        first = [f.result() for f in [paged.submit(p, SamplingParams(max_tokens=12, seed=i)) for i, p in enumerate(ps)]]
        follow = ps[0] + first[0].token_ids + tok.encode("<|im_end|>\n<|im_start|>user\nVote.<|im_end|>\n")
        calls = [*((p, i, got) for (i, p), got in zip(enumerate(ps), first, strict=True)),
                 (follow, 9, paged.generate(follow, SamplingParams(max_tokens=12, seed=9)))]
        for prompt, seed, got in calls:
            want = simple.generate(prompt, SamplingParams(max_tokens=12, seed=seed))
            assert got.token_ids == want.token_ids
            assert max(abs(a - b) for a, b in zip(got.logprobs, want.logprobs, strict=True)) < 1e-4
        assert paged.stats["prefix_hit_tokens"] > 0
    finally:
        simple.close()
        paged.close()


@pytest.mark.parametrize("vocab", [1000, 9000])
def test_fused_sampling_draws_what_the_torch_sampler_draws(vocab):
    """Same seeds, same Gumbel noise: the fused sampler picks the torch sampler's tokens (greedy rows too)
    and reports their log-probabilities under softmax(logits / T)."""
    from vibe_rl.engine.sampler import gumbel_sample
    from vibe_rl.rl.logprobs import sampling_logprobs

    g = torch.Generator().manual_seed(vocab)
    b = 6
    logits = (torch.randn(b, vocab, generator=g) * 3).to(DEV)
    temps = torch.tensor([1.0, 0.7, 0.0, 1.3, 1.0, 0.0], device=DEV)
    seeds = torch.tensor([0, 1, 2, 2**62, -5, 7], device=DEV)
    steps = torch.tensor([0, 3, 9, 1, 100, 2], device=DEV)
    picked, chosen = K.sample(logits, temps, seeds, steps)
    logp = sampling_logprobs(logits, temps, torch.ones_like(temps), nucleus=False)
    want = torch.where(temps == 0, logits.argmax(-1), gumbel_sample(logp, seeds, steps))
    assert picked.tolist() == want.tolist()
    assert torch.allclose(chosen, logp.gather(-1, want[:, None])[:, 0], atol=1e-4)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("heads", "kv", "d", "block"), [(14, 2, 64, 16), (4, 4, 16, 8)])
def test_prefill_attention_is_causal_attention_over_each_sequences_context(dtype, heads, kv, d, block):
    """New tokens of two sequences (one after a cached prefix, one from position 0) in tiles of one
    sequence each: every token sees the keys up to its own position, none beyond."""
    g = torch.Generator().manual_seed(heads + block)
    nblocks, width = 90, 40
    k = torch.randn(kv, nblocks * block, d, generator=g).to(DEV, dtype)
    v = torch.randn(kv, nblocks * block, d, generator=g).to(DEV, dtype)
    tables = torch.stack([torch.randperm(nblocks - 1, generator=g)[:width] + 1 for _ in range(3)]).to(DEV)
    segments = [(2, 270, 37), (0, 0, 20)]  # (table row, first position, new tokens)
    pos = torch.tensor([p for _, s, t in segments for p in range(s, s + t)], device=DEV)
    row_of = [r for r, _, t in segments for _ in range(t)]
    q = torch.randn(len(pos), heads, d, generator=g).to(DEV, dtype)
    per = K.prefill_tile_tokens(heads, kv)
    tiles, a = [], 0
    for r, _, t in segments:
        tiles += [(t0, min(per, a + t - t0), r) for t0 in range(a, a + t, per)]
        a += t
    tiles_t = torch.tensor(list(zip(*tiles, strict=True)), device=DEV)
    out = K.prefill_attention(q, k, v, tables, tiles_t, pos + 1, 1 / math.sqrt(d), block_size=block, context=512,
                              tokens_per_tile=per)
    for i, (p, r) in enumerate(zip(pos.tolist(), row_of, strict=True)):
        rows = tables[r, torch.arange(p + 1, device=DEV) // block] * block + torch.arange(p + 1, device=DEV) % block
        keys = k[:, rows].float().repeat_interleave(heads // kv, 0)
        vals = v[:, rows].float().repeat_interleave(heads // kv, 0)
        probs = torch.einsum("hd,hnd->hn", q[i].float(), keys).div(math.sqrt(d)).softmax(-1)
        assert rel(out[i], torch.einsum("hn,hnd->hd", probs, vals)) < TOL[dtype], (i, p)


def test_a_failing_prefill_kernel_falls_back_to_torch_attention(tiny_model_dir, monkeypatch, caplog):
    """A kernel build the GPU cannot run must cost speed, never the request: prefill switches to SDPA."""
    from vibe_rl.engine import SamplingParams, load_engine
    from vibe_rl.schema import EngineConfig

    def broken(*args, **kwargs):
        raise RuntimeError("no kernel for this GPU")

    monkeypatch.setattr(K, "prefill_attention", broken)
    simple = load_engine(EngineConfig(path=str(tiny_model_dir), device=DEV, generator="simple", dtype="float32"),
                         trainable=False)
    paged = load_engine(EngineConfig(path=str(tiny_model_dir), device=DEV, generator="paged", dtype="float32",
                                     cuda_graphs=False), trainable=False)
    try:
        prompt = paged.tokenizer.encode("Player 3: describe your word.")
        got = paged.generate(prompt, SamplingParams(max_tokens=6, seed=1))
        assert got.token_ids == simple.generate(prompt, SamplingParams(max_tokens=6, seed=1)).token_ids
        assert paged.paged.runner._prefill_kernel is False
        assert "prefill uses torch SDPA" in caplog.text
    finally:
        simple.close()
        paged.close()
