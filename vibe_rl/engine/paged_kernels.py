"""Triton kernels for the paged decoder's hot path (GPU; Triton's interpreter runs them on CPU in tests).

A decode step of a 7B model at batch 64 spent half its GPU time outside the weight
GEMMs: 3.1 ms of 11.2 ms copying every sequence's K/V blocks into a dense tensor for
the attention matmuls, and ~2.5 ms in ~600 small elementwise kernels (norms, RoPE,
residual adds, SiLU). These four kernels replace them (docs/architecture.md has the
profile):

* `paged_attention(q, k, v, tables, lengths, scale)`: one query token per sequence
  attends to its cached keys and values read in place through its block table
  (`row of token p = table[p // B] * B + p % B`), flash-decoding style: programs
  (sequence, kv head, split of 256 tokens) keep an online softmax over their split
  for the G query heads of their kv head, then one reduction merges the splits:

      out = sum_s exp(m_s - M) * o_s / sum_s exp(m_s - M) * l_s,   M = max_s m_s

  where per split m_s = max score, l_s = sum exp(score - m_s), o_s = sum exp(score - m_s) v.
* `rope_store(qkv, cos, sin, pos, write, k, v)`: RoPE on the query and key heads of a
  fused q/k/v projection (`x * cos + roll(x, d/2) * sin`, sin's first half negated),
  keys and values written to their cache rows; returns the rotated queries.
* `add_rms_norm(x, delta, weight, eps)`: `x + delta` (the residual) and HF's RMSNorm of
  it, `weight * (x * rsqrt(mean(x^2) + eps)).to(dtype)`, in one pass.
* `silu_mul(gate, up)`: `silu(gate) * up`, the SwiGLU MLP's middle.

Arithmetic is fp32 inside each kernel with one rounding to the cache dtype at the end;
the eager path rounds after each op, so the two agree to bf16 precision, not bitwise.
This module imports torch and Triton at the top (the kernels are defined at import): only
`paged_model.load_kernels` imports it, on a GPU (or under Triton's interpreter).
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

SPLIT_TOKENS = 256  # context tokens per attention program
TILE = 64  # tokens per inner iteration


@triton.jit
def _key_tile(q, k_ptr, v_ptr, table_row, start, seen, longest, m_i, l_i, acc, base, scale, B: tl.constexpr,
              D: tl.constexpr, TILE: tl.constexpr, PREC: tl.constexpr):
    """One online-softmax step of query rows q (R, D) over keys [start, start + TILE) of one sequence,
    read through its block-table row; `seen` (R,) = keys each row may see. -> updated (m, l, acc)."""
    key, dd = start + tl.arange(0, TILE), tl.arange(0, D)
    valid = key < longest
    block = tl.load(table_row + key // B, mask=valid, other=0)
    offs = base + (block * B + key % B)[:, None] * D + dd[None, :]  # (TILE, D) cache elements
    k = tl.load(k_ptr + offs, mask=valid[:, None], other=0.0)
    s = tl.dot(q, tl.trans(k), input_precision=PREC) * scale  # (R, TILE)
    s = tl.where(key[None, :] < seen[:, None], s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with no key yet: no NaN
    alpha = tl.exp(m_i - m_safe)
    p = tl.exp(s - m_safe[:, None])
    v = tl.load(v_ptr + offs, mask=valid[:, None], other=0.0)
    return m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PREC)


@triton.jit
def _attend_split(q, k_ptr, v_ptr, o_ptr, m_ptr, l_ptr, table_row, seen, longest, part, mask, split, kvh, slots, scale,
                  R: tl.constexpr, D: tl.constexpr, B: tl.constexpr, SPLIT: tl.constexpr, TILE: tl.constexpr,
                  PREC: tl.constexpr):
    """Query rows q (R, D) over their sequence's keys in [split * SPLIT, (split + 1) * SPLIT): the online
    softmax's (max, sum, weighted values) stored at `part` for `_attention_merge`."""
    m_i = tl.full([R], float("-inf"), tl.float32)
    l_i = tl.zeros([R], tl.float32)
    acc = tl.zeros([R, D], tl.float32)
    base = kvh.to(tl.int64) * slots * D
    for it in tl.range(0, SPLIT // TILE):
        start = split * SPLIT + it * TILE
        if start < longest:
            m_i, l_i, acc = _key_tile(q, k_ptr, v_ptr, table_row, start, seen, longest, m_i, l_i, acc, base, scale,
                                      B, D, TILE, PREC)
    dd = tl.arange(0, D)
    tl.store(m_ptr + part, m_i, mask=mask)
    tl.store(l_ptr + part, l_i, mask=mask)
    tl.store(o_ptr + part[:, None] * D + dd[None, :], acc, mask=mask[:, None])


@triton.jit
def _attention_split(q_ptr, k_ptr, v_ptr, table_ptr, len_ptr, o_ptr, m_ptr, l_ptr, scale, slots, table_stride,
                     H: tl.constexpr, G: tl.constexpr, GP: tl.constexpr, D: tl.constexpr, B: tl.constexpr,
                     NSPLIT: tl.constexpr, SPLIT: tl.constexpr, TILE: tl.constexpr, PREC: tl.constexpr):
    row, kvh, split = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    length = tl.load(len_ptr + row)
    g, dd = tl.arange(0, GP), tl.arange(0, D)
    gmask = g < G
    heads = kvh * G + g
    q = tl.load(q_ptr + (row * H + heads)[:, None] * D + dd[None, :], mask=gmask[:, None], other=0.0)
    seen = tl.zeros([GP], tl.int64) + length
    _attend_split(q, k_ptr, v_ptr, o_ptr, m_ptr, l_ptr, table_ptr + row * table_stride, seen, length,
                  (row * H + heads) * NSPLIT + split, gmask, split, kvh, slots, scale, GP, D, B, SPLIT, TILE, PREC)


@triton.jit
def _attention_merge(o_ptr, m_ptr, l_ptr, out_ptr, NSPLIT: tl.constexpr, NP: tl.constexpr, D: tl.constexpr):
    head = tl.program_id(0)  # row * H + query head
    s, dd = tl.arange(0, NP), tl.arange(0, D)
    smask = s < NSPLIT
    m = tl.load(m_ptr + head * NSPLIT + s, mask=smask, other=float("-inf"))
    l = tl.load(l_ptr + head * NSPLIT + s, mask=smask, other=0.0)  # noqa: E741
    w = tl.where(smask & (m > float("-inf")), tl.exp(m - tl.max(m, 0)), 0.0)
    o = tl.load(o_ptr + (head * NSPLIT + s)[:, None] * D + dd[None, :], mask=smask[:, None], other=0.0)
    out = tl.sum(o * w[:, None], 0) / tl.sum(w * l, 0)
    tl.store(out_ptr + head * D + dd, out.to(out_ptr.dtype.element_ty))


def paged_attention(q: Any, k: Any, v: Any, tables: Any, lengths: Any, scale: float, *, block_size: int,
                    context: int) -> Any:
    """q (b, H, d); k, v (Hkv, S, d) caches; tables (b, >= context / B) block ids; lengths (b,) tokens to
    attend (the new one included, >= 1); `context` bounds every length -> (b, H, d) in q's dtype."""
    b, heads, d = q.shape
    kv = k.shape[0]
    group = heads // kv
    nsplit = -(-context // SPLIT_TOKENS)
    parts = torch.empty(b * heads * nsplit, d, dtype=torch.float32, device=q.device)
    m = torch.empty(b * heads * nsplit, dtype=torch.float32, device=q.device)
    l = torch.empty_like(m)  # noqa: E741
    _attention_split[(b, kv, nsplit)](q, k, v, tables, lengths, parts, m, l, scale, k.shape[1], tables.stride(0),
                                      H=heads, G=group, GP=max(16, triton.next_power_of_2(group)), D=d, B=block_size,
                                      NSPLIT=nsplit, SPLIT=SPLIT_TOKENS, TILE=TILE,
                                      PREC="ieee" if q.dtype == torch.float32 else "tf32")
    out = torch.empty_like(q)
    _attention_merge[(b * heads,)](parts, m, l, out, NSPLIT=nsplit, NP=triton.next_power_of_2(nsplit), D=d)
    return out


@triton.jit
def _prefill_split(q_ptr, k_ptr, v_ptr, table_ptr, tile_ptr, len_ptr, o_ptr, m_ptr, l_ptr, scale, slots, table_stride,
                   ntiles, H: tl.constexpr, G: tl.constexpr, GP: tl.constexpr, TQ: tl.constexpr, D: tl.constexpr,
                   B: tl.constexpr, NSPLIT: tl.constexpr, SPLIT: tl.constexpr, TILE: tl.constexpr,
                   PREC: tl.constexpr):
    """`_attention_split` for a tile of TQ consecutive new tokens of one sequence: the TQ * GP query rows
    (token, head of the group) share every K/V load; each row masks keys past its own position."""
    tile, kvh, split = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    first = tl.load(tile_ptr + tile)  # index of the tile's first token in q
    count = tl.load(tile_ptr + ntiles + tile)  # tokens in this tile (<= TQ)
    seq = tl.load(tile_ptr + 2 * ntiles + tile)  # the sequence's block-table row
    r, dd = tl.arange(0, TQ * GP), tl.arange(0, D)
    tok, g = r // GP, r % GP
    rmask = (tok < count) & (g < G)
    token = first + tok
    heads = kvh * G + g
    q = tl.load(q_ptr + (token * H + heads)[:, None] * D + dd[None, :], mask=rmask[:, None], other=0.0)
    length = tl.load(len_ptr + token, mask=rmask, other=0)  # (rows,) keys each row may see
    _attend_split(q, k_ptr, v_ptr, o_ptr, m_ptr, l_ptr, table_ptr + seq * table_stride, length, tl.max(length, 0),
                  (token * H + heads) * NSPLIT + split, rmask, split, kvh, slots, scale, TQ * GP, D, B, SPLIT, TILE,
                  PREC)


def prefill_attention(q: Any, k: Any, v: Any, tables: Any, tiles: Any, lengths: Any, scale: float, *,
                      block_size: int, context: int, tokens_per_tile: int) -> Any:
    """Causal attention of new tokens over their sequences' cached context (their own K/V already written).
    q (N, H, d); k, v (Hkv, S, d); tables: the block-table tensor; tiles (3, T): per tile its first token in
    q, its token count (<= tokens_per_tile, one sequence) and its sequence's table row; lengths (N,) = position
    + 1 -> (N, H, d)."""
    n, heads, d = q.shape
    kv = k.shape[0]
    group = heads // kv
    nsplit = -(-context // SPLIT_TOKENS)
    ntiles = tiles.shape[1]
    parts = torch.empty(n * heads * nsplit, d, dtype=torch.float32, device=q.device)
    m = torch.full((n * heads * nsplit,), float("-inf"), dtype=torch.float32, device=q.device)
    l = torch.zeros_like(m)  # noqa: E741
    _prefill_split[(ntiles, kv, nsplit)](q, k, v, tables, tiles, lengths, parts, m, l, scale, k.shape[1],
                                         tables.stride(0), ntiles, H=heads, G=group,
                                         GP=triton.next_power_of_2(group), TQ=tokens_per_tile, D=d, B=block_size,
                                         NSPLIT=nsplit, SPLIT=SPLIT_TOKENS, TILE=TILE,
                                         PREC="ieee" if q.dtype == torch.float32 else "tf32")
    out = torch.empty_like(q)
    _attention_merge[(n * heads,)](parts, m, l, out, NSPLIT=nsplit, NP=triton.next_power_of_2(nsplit), D=d)
    return out


def prefill_tile_tokens(heads: int, kv: int) -> int:
    """New tokens per prefill program: 64 query rows (tokens x the group's heads, padded to a power of 2)."""
    return max(1, 64 // triton.next_power_of_2(heads // kv))


@triton.jit
def _rope_store(qkv_ptr, cos_ptr, sin_ptr, pos_ptr, write_ptr, q_ptr, k_ptr, v_ptr, slots,
                H: tl.constexpr, KV: tl.constexpr, D: tl.constexpr):
    n, h = tl.program_id(0), tl.program_id(1)  # token, head of the fused projection (q heads, k heads, v heads)
    dd = tl.arange(0, D)
    src = qkv_ptr + (n * (H + 2 * KV) + h).to(tl.int64) * D
    x = tl.load(src + dd).to(tl.float32)
    row = tl.load(write_ptr + n).to(tl.int64)
    if h < H + KV:
        p = tl.load(pos_ptr + n).to(tl.int64)
        rolled = tl.load(src + (dd + D // 2) % D).to(tl.float32)
        y = x * tl.load(cos_ptr + p * D + dd).to(tl.float32) + rolled * tl.load(sin_ptr + p * D + dd).to(tl.float32)
        if h < H:
            tl.store(q_ptr + (n * H + h) * D + dd, y.to(q_ptr.dtype.element_ty))
        else:
            tl.store(k_ptr + ((h - H) * slots + row) * D + dd, y.to(k_ptr.dtype.element_ty))
    else:
        tl.store(v_ptr + ((h - H - KV) * slots + row) * D + dd, x.to(v_ptr.dtype.element_ty))


def rope_store(qkv: Any, cos: Any, sin: Any, pos: Any, write: Any, k: Any, v: Any, heads: int) -> Any:
    """qkv (N, (H + 2 Hkv) d) contiguous; cos, sin (L, d); pos, write (N,) -> rotated queries (N, H, d);
    rotated keys and the values land in rows `write` of the caches k, v (Hkv, S, d)."""
    kv, slots, d = k.shape
    n = qkv.shape[0]
    q = torch.empty(n, heads, d, dtype=qkv.dtype, device=qkv.device)
    _rope_store[(n, heads + 2 * kv)](qkv, cos, sin, pos, write, q, k, v, slots, H=heads, KV=kv, D=d)
    return q


@triton.jit
def _add_rms_norm(x_ptr, delta_ptr, w_ptr, out_ptr, res_ptr, eps, cols, BLOCK: tl.constexpr,
                  HAS_DELTA: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK)
    mask = c < cols
    x = tl.load(x_ptr + r * cols + c, mask=mask, other=0.0)
    if HAS_DELTA:  # the residual add, rounded to the stream's dtype as the eager path does
        x = (x.to(tl.float32) + tl.load(delta_ptr + r * cols + c, mask=mask, other=0.0).to(tl.float32)).to(x.dtype)
        tl.store(res_ptr + r * cols + c, x, mask=mask)
    xf = x.to(tl.float32)
    normed = (xf * tl.rsqrt(tl.sum(xf * xf, 0) / cols + eps)).to(x.dtype).to(tl.float32)
    w = tl.load(w_ptr + c, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + r * cols + c, (normed * w).to(out_ptr.dtype.element_ty), mask=mask)


def add_rms_norm(x: Any, delta: Any, weight: Any, eps: float) -> tuple[Any, Any]:
    """x, delta (N, D) or delta None; weight (D,) -> (x + delta, RMSNorm(x + delta)), each (N, D)."""
    n, cols = x.shape
    out = torch.empty_like(x)
    res = torch.empty_like(x) if delta is not None else x
    _add_rms_norm[(n,)](x, delta if delta is not None else x, weight, out, res, eps, cols,
                        BLOCK=triton.next_power_of_2(cols), HAS_DELTA=delta is not None)
    return res, out


@triton.jit
def _silu_mul(gate_ptr, up_ptr, out_ptr, total, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = i < total
    g = tl.load(gate_ptr + i, mask=mask, other=0.0).to(tl.float32)
    act = (g / (1.0 + tl.exp(-g))).to(out_ptr.dtype.element_ty).to(tl.float32)
    up = tl.load(up_ptr + i, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + i, (act * up).to(out_ptr.dtype.element_ty), mask=mask)


def silu_mul(gate: Any, up: Any) -> Any:
    """silu(gate) * up for two contiguous tensors of one shape."""
    out = torch.empty_like(gate)
    total = gate.numel()
    _silu_mul[(triton.cdiv(total, 1024),)](gate, up, out, total, BLOCK=1024)
    return out



@triton.jit
def _splitmix(z):
    """SplitMix64's finaliser on uint64 (wrapping), the same bits as vibe_rl.engine.sampler._mix."""
    z = z + 0x9E3779B97F4A7C15
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
    z = (z ^ (z >> 31)) * 0x94D049BB133111EB
    return z ^ (z >> 31)


@triton.jit
def _sample_chunk(logits_ptr, temp_ptr, seed_ptr, step_ptr, part_ptr, vocab, stride, NCH: tl.constexpr,
                  CHUNK: tl.constexpr):
    row, ch = tl.program_id(0), tl.program_id(1)
    cols = ch * CHUNK + tl.arange(0, CHUNK)
    mask = cols < vocab
    temp = tl.load(temp_ptr + row)
    x = tl.load(logits_ptr + row.to(tl.int64) * stride + cols, mask=mask, other=float("-inf")).to(tl.float32)
    x = x / tl.where(temp > 0, temp, 1.0)
    m = tl.max(x, 0)
    s = tl.sum(tl.where(mask, tl.exp(x - m), 0.0), 0)
    seed = tl.load(seed_ptr + row).to(tl.uint64, bitcast=True)
    step = tl.load(step_ptr + row).to(tl.uint64, bitcast=True)
    key = _splitmix(seed ^ _splitmix(step))
    bits = _splitmix(key + cols.to(tl.uint64) * 0x9E3779B97F4A7C15)
    uniform = ((bits >> 40).to(tl.float32) + 0.5) / 16777216.0
    noisy = tl.where(temp > 0, x - tl.log(-tl.log(uniform)), x)  # Gumbel-max; greedy rows: the plain argmax
    noisy = tl.where(mask, noisy, float("-inf"))
    best = tl.max(noisy, 0)
    idx = tl.min(tl.where(noisy == best, cols, 2147483647), 0)  # first index of the maximum
    out = part_ptr + (row * NCH + ch) * 4
    tl.store(out, m)
    tl.store(out + 1, s)
    tl.store(out + 2, best)
    tl.store(out + 3, idx.to(tl.float32, bitcast=True))


@triton.jit
def _sample_merge(logits_ptr, temp_ptr, part_ptr, picked_ptr, chosen_ptr, stride, NCH: tl.constexpr,
                  NP: tl.constexpr):
    row = tl.program_id(0)
    c = tl.arange(0, NP)
    mask = c < NCH
    base = part_ptr + (row * NCH + c) * 4
    m = tl.load(base, mask=mask, other=float("-inf"))
    s = tl.load(base + 1, mask=mask, other=0.0)
    best = tl.load(base + 2, mask=mask, other=float("-inf"))
    idx = tl.load(base + 3, mask=mask, other=0.0).to(tl.int32, bitcast=True)
    top = tl.max(m, 0)
    lse = top + tl.log(tl.sum(tl.where(mask, s * tl.exp(m - top), 0.0), 0))
    winner = tl.max(best, 0)
    token = tl.min(tl.where(mask & (best == winner), idx, 2147483647), 0)
    temp = tl.load(temp_ptr + row)
    logit = tl.load(logits_ptr + row.to(tl.int64) * stride + token).to(tl.float32) / tl.where(temp > 0, temp, 1.0)
    tl.store(picked_ptr + row, token.to(tl.int64))
    tl.store(chosen_ptr + row, logit - lse)


def sample(logits: Any, temperature: Any, seeds: Any, steps: Any) -> tuple[Any, Any]:
    """Without top-p: one token per row of softmax(logits / T) (argmax where T = 0) by Gumbel-max with the
    noise of `sampler.gumbel_sample` (same seeds, same hash), and its logprob (scaled logit - logsumexp).
    logits (b, V), temperature (b,), seeds, steps (b,) int64 -> (ids (b,) int64, logprobs (b,) fp32)."""
    b, vocab = logits.shape
    chunk = 4096
    nch = triton.cdiv(vocab, chunk)
    parts = torch.empty(b, nch, 4, dtype=torch.float32, device=logits.device)
    temps = temperature.float().contiguous()
    _sample_chunk[(b, nch)](logits, temps, seeds, steps, parts, vocab, logits.stride(0), NCH=nch, CHUNK=chunk)
    picked = torch.empty(b, dtype=torch.long, device=logits.device)
    chosen = torch.empty(b, dtype=torch.float32, device=logits.device)
    _sample_merge[(b,)](logits, temps, parts, picked, chosen, logits.stride(0), NCH=nch,
                        NP=triton.next_power_of_2(nch))
    return picked, chosen
