"""A transformers decoder run over a paged KV cache: chunked prefill and (CUDA-graph) decode steps.

The weights are the HF model's own modules (embeddings, norms, projections, MLPs,
LoRA wrappers included), called in the same order as the HF forward; only
attention is ours, because it reads keys and values through block tables:

    cache row of token p of a sequence = table[p // B] * B + p % B      (B = block size)

Per layer the cache is `(Hkv, S, d)` (S = blocks * B), so gathering a batch's
context `cache[:, rows]` gives `(Hkv, b, L, d)`: with the kv heads as SDPA's batch
and the sequences as its heads, grouped-query attention needs no head copies.

* `prefill(segments)`: one eager forward over the new tokens of several sequences
  (each may start after a cached prefix); each segment attends causally to its
  whole context; returns the logits of each segment's last token.
* `decode(ids, pos, rows, src=...)`: one token for each of b sequences. On CUDA the step is
  captured once per (batch bucket, context bucket) as a CUDA graph and replayed,
  so a step costs one launch instead of hundreds; elsewhere it runs eagerly. It returns
  a `DecodeStep` at once: the caller launches the next step before reading this one's
  tokens (a row's input may be "the token the previous step sampled in row j", read on
  the device), so the host's bookkeeping overlaps the GPU's work.

With `fused_kernels` on a GPU (Triton installed), decode attention reads K/V in place through
the block tables and norms, RoPE + cache writes and SwiGLU run as fused kernels
(`paged_kernels.py`): ~11 kernels per layer instead of ~40, and no per-step copy of the
batch's context.

Supported: Qwen2, Qwen3, Llama and Mistral-style decoders without sliding windows
(`unsupported_reason` says why another model is not; it then uses the simple loop).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from vibe_rl.engine.sampler import sample
from vibe_rl.extras import require

log = logging.getLogger(__name__)
_CAPTURE_LOCK = threading.Lock()

SUPPORTED = ("Qwen2ForCausalLM", "Qwen3ForCausalLM", "LlamaForCausalLM", "MistralForCausalLM")
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)  # few buckets: each (batch, context) pair is one capture


def kv_bytes_per_token(model: Any) -> int:
    """Bytes of K and V that one token occupies across all layers."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    c = base.config
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    element = next(model.parameters()).element_size()
    return 2 * c.num_hidden_layers * c.num_key_value_heads * head_dim * element


def unsupported_reason(model: Any) -> str | None:
    """None when the paged runner can drive `model`, else why not."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    name = type(base).__name__
    if name not in SUPPORTED:
        return f"{name} is not one of the paged engine's architectures ({', '.join(SUPPORTED)})"
    cfg = base.config
    if getattr(cfg, "use_sliding_window", False) and getattr(cfg, "sliding_window", None):
        return "the model uses sliding-window attention"
    return None


def load_kernels(device: Any) -> Any:
    """The Triton kernels module for `device`, or None (CPU without Triton's interpreter, Triton missing)."""
    import importlib.util
    import os

    if device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        return None
    if importlib.util.find_spec("triton") is None:
        log.warning("Triton is not installed: the paged engine runs without its fused kernels (pip install triton)")
        return None
    from vibe_rl.engine import paged_kernels

    return paged_kernels


def _rms_args(module: Any) -> tuple[Any, float] | None:
    """(weight, eps) of an HF RMSNorm, None for another norm."""
    eps, weight = getattr(module, "variance_epsilon", None), getattr(module, "weight", None)
    return None if eps is None or weight is None else (weight, float(eps))


def _norm(module: Any, x: Any) -> Any:
    """An HF RMSNorm (weight, variance_epsilon) in fewer kernels, same fp32 arithmetic; other norms as they are."""
    eps = getattr(module, "variance_epsilon", None)
    if eps is None or getattr(module, "weight", None) is None:
        return module(x)
    F = require("torch").nn.functional
    return module.weight * F.rms_norm(x.float(), (x.shape[-1],), eps=eps).to(x.dtype)


class _Graph:
    """A captured decode + sampling step: static inputs written before each replay, static outputs."""

    def __init__(self, graph: Any, inp: Any, params: Any, out: tuple[Any, Any, Any]):
        self.graph, self.inp, self.params, self.out = graph, inp, params, out


class DecodeStep:
    """A launched decode step. `result()` waits for it and returns (token ids, their logprobs) as lists.

    On CUDA the outputs are copied into pinned host memory as part of the step, so reading them
    waits for this step only, not for a step launched after it. `logp` (the 'dist' mode's full
    distributions, else None) lives in the step's output buffers: read it before the next launch.
    """

    def __init__(self, picked: Any, chosen: Any, logp: Any, b: int, host: tuple[Any, Any, Any] | None = None):
        self.picked, self.chosen, self.logp, self.b, self.host = picked[:b], chosen[:b], logp, b, host
        if host is not None:
            tokens, logprobs, done = host
            tokens[:b].copy_(self.picked, non_blocking=True)
            logprobs[:b].copy_(self.chosen.float(), non_blocking=True)
            done.record()

    def result(self) -> tuple[list[int], list[float]]:
        if self.host is None:
            return self.picked.tolist(), self.chosen.tolist()
        tokens, logprobs, done = self.host
        done.synchronize()
        return tokens[:self.b].tolist(), logprobs[:self.b].tolist()


class _Staging:
    """Two sets of pinned host buffers, used in turn: a step's inputs and outputs stay untouched while
    the next step is prepared (one step in flight at most)."""

    def __init__(self, size: int):
        torch = require("torch")
        self.sets = [(torch.zeros(6 * size, dtype=torch.long, pin_memory=True),  # viewed as (6, bucket)
                      torch.zeros(2 * size, dtype=torch.float32, pin_memory=True),  # viewed as (2, bucket)
                      torch.zeros(size, dtype=torch.long, pin_memory=True),
                      torch.zeros(size, dtype=torch.float32, pin_memory=True),
                      torch.cuda.Event()) for _ in range(2)]
        self.turn = 0

    def next(self) -> tuple[Any, Any, Any, Any, Any]:
        self.turn ^= 1
        return self.sets[self.turn]


class PagedModel:
    """KV tensors plus the forward passes that read and write them."""

    def __init__(self, model: Any, *, num_blocks: int, block_size: int, max_model_len: int, max_rows: int,
                 cuda_graphs: bool = True, fused_kernels: bool = True):
        torch = require("torch", "the paged engine")
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        self.inner, self.lm_head = base.model, base.lm_head
        self.layers = list(self.inner.layers)
        cfg, attn = base.config, self.layers[0].self_attn
        self.n_heads, self.n_kv, self.head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, attn.head_dim
        self.group, self.scaling = self.n_heads // self.n_kv, float(attn.scaling)
        self.qk_norm = hasattr(attn, "q_norm")
        param = next(model.parameters())
        self.device, self.dtype = param.device, param.dtype
        self.block_size, self.num_blocks, self.max_rows = block_size, num_blocks, max_rows
        self.max_blocks = -(-max_model_len // block_size)
        slots = num_blocks * block_size
        with torch.no_grad():
            self.k = [torch.zeros(self.n_kv, slots, self.head_dim, dtype=self.dtype, device=self.device)
                      for _ in self.layers]
            self.v = [torch.zeros_like(t) for t in self.k]
            # Block tables by row slot; the extra last row is all zeros: padding rows point at scratch block 0.
            self.tables = torch.zeros(max_rows + 1, self.max_blocks, dtype=torch.long, device=self.device)
            positions = torch.arange(max_model_len, device=self.device)[None]  # (1, L)
            probe = torch.zeros(1, dtype=self.dtype, device=self.device)
            cos, sin = self.inner.rotary_emb(probe, positions)  # the HF module: same values as training
            # rotate_half(x) * sin == roll(x, d/2) * (sin with its first half negated): one kernel fewer
            sign = torch.ones(self.head_dim, dtype=sin.dtype, device=self.device)
            sign[: self.head_dim // 2] = -1
            self.cos, self.sin = cos[0], sin[0] * sign  # (L, d)
            self._fused = self._make_fused()
            self.refresh()
        pow2 = self.head_dim >= 16 and self.head_dim & (self.head_dim - 1) == 0  # the kernels' tiles need it
        self.kernels = load_kernels(self.device) if fused_kernels and pow2 else None
        self._fused_layers = self._fused_layer_args() if self.kernels is not None else None
        self._prefill_kernel = True  # off after a failed kernel build (prefill then takes the torch path)
        self.use_graphs = cuda_graphs and self.device.type == "cuda"
        self._graphs: dict[tuple[int, int, str], _Graph] = {}
        self._pool = torch.cuda.graph_pool_handle() if self.use_graphs else None
        size = max(max_rows, BATCH_BUCKETS[-1])
        self._last = torch.zeros(size, dtype=torch.long, device=self.device)  # the last decode step's sampled ids
        self._staging = _Staging(size) if self.device.type == "cuda" else None

    @property
    def bytes_per_block(self) -> int:
        return 2 * len(self.layers) * self.n_kv * self.block_size * self.head_dim * self.k[0].element_size()

    def set_table(self, row: int, blocks: list[int]) -> None:
        torch = require("torch")
        self.tables[row, :len(blocks)] = torch.tensor(blocks, dtype=torch.long).to(self.device, non_blocking=True)

    def _make_fused(self) -> list[tuple[Any, Any]] | None:
        """One (weight, bias) buffer per layer for q, k and v together (one GEMM, one RoPE), when the
        projections are plain Linear layers (LoRA-wrapped ones are called as they are)."""
        torch = require("torch")
        attn = [layer.self_attn for layer in self.layers]
        if self.qk_norm or any(type(m) is not torch.nn.Linear for a in attn for m in (a.q_proj, a.k_proj, a.v_proj)):
            return None
        out = []
        for a in attn:
            rows = a.q_proj.out_features + a.k_proj.out_features + a.v_proj.out_features
            weight = torch.empty(rows, a.q_proj.in_features, dtype=self.dtype, device=self.device)
            bias = torch.empty(rows, dtype=self.dtype, device=self.device) if a.q_proj.bias is not None else None
            out.append((weight, bias))
        return out

    def refresh(self) -> None:
        """Copy the current q/k/v weights into the fused buffers (in place: captured graphs stay valid).
        Called whenever the weights change, with the prefix-cache invalidation."""
        if self._fused is None:
            return
        torch = require("torch")
        with torch.no_grad():
            for layer, (weight, bias) in zip(self.layers, self._fused, strict=True):
                a = layer.self_attn
                torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight], out=weight)
                if bias is not None:
                    torch.cat([a.q_proj.bias, a.k_proj.bias, a.v_proj.bias], out=bias)

    def drop_graphs(self) -> None:
        """Forget captured graphs (after the parameters were replaced rather than updated in place)."""
        self._graphs.clear()

    def _fused_layer_args(self) -> list[tuple[Any, Any, Any]] | None:
        """Per layer (input norm, post-attention norm, next norm) as (weight, eps), when the kernel decoder
        can run this model: fused q/k/v, RMSNorms and a SiLU-gated MLP of plain Linear layers."""
        torch = require("torch")
        norms = [_rms_args(m) for layer in self.layers for m in (layer.input_layernorm, layer.post_attention_layernorm)]
        final = _rms_args(self.inner.norm)
        mlps = [layer.mlp for layer in self.layers]
        plain = all(type(getattr(m, name, None)) is torch.nn.Linear for m in mlps
                    for name in ("gate_proj", "up_proj", "down_proj"))
        silu = all(type(m.act_fn).__name__ in ("SiLUActivation", "SiLU") for m in mlps if hasattr(m, "act_fn"))
        if self._fused is None or final is None or None in norms or not plain or not silu:
            return None
        pre, post = norms[0::2], norms[1::2]
        return [(pre[i], post[i], pre[i + 1] if i + 1 < len(pre) else final) for i in range(len(self.layers))]

    # ---- the decoder ----------------------------------------------------------------------

    def _layers(self, ids: Any, pos: Any, write: Any, attend: Any) -> Any:
        """ids/pos/write (N,) -> final hidden states (N, D); `attend(layer, q (N, H, d))` -> (N, H, d)."""
        if self._fused_layers is not None:
            return self._kernel_layers(ids, pos, write, attend)
        torch = require("torch")
        F = torch.nn.functional
        n, d, heads, kv = ids.shape[0], self.head_dim, self.n_heads, self.n_kv
        cos, sin = self.cos[pos][:, None, :], self.sin[pos][:, None, :]  # (N, 1, d)

        def rope(x: Any) -> Any:
            return x * cos + x.roll(d // 2, dims=-1) * sin

        x = self.inner.embed_tokens(ids)  # (N, D)
        for i, layer in enumerate(self.layers):
            a = layer.self_attn
            h = _norm(layer.input_layernorm, x)
            if self._fused is not None:
                qkv = F.linear(h, *self._fused[i])  # (N, (H + 2 Hkv) d)
                qk = rope(qkv[:, :(heads + kv) * d].view(n, heads + kv, d))  # (N, H + Hkv, d)
                q, k = qk[:, :heads], qk[:, heads:]
                v = qkv[:, (heads + kv) * d:].view(n, kv, d)
            else:
                q = a.q_proj(h).view(n, heads, d)  # (N, H, d)
                k = a.k_proj(h).view(n, kv, d)  # (N, Hkv, d)
                v = a.v_proj(h).view(n, kv, d)
                if self.qk_norm:
                    q, k = _norm(a.q_norm, q), _norm(a.k_norm, k)
                q, k = rope(q), rope(k)
            self.k[i].index_copy_(1, write, k.transpose(0, 1))  # (Hkv, N, d) into the cache rows
            self.v[i].index_copy_(1, write, v.transpose(0, 1))
            o = attend(i, q)  # (N, H, d)
            x = x + a.o_proj(o.reshape(n, heads * d))
            x = x + layer.mlp(_norm(layer.post_attention_layernorm, x))
        return _norm(self.inner.norm, x)

    def _kernel_layers(self, ids: Any, pos: Any, write: Any, attend: Any) -> Any:
        """`_layers` with the fused kernels: the same modules and order, each norm fused with the
        residual add before it, RoPE with the cache write, SiLU with the gate product."""
        F, kern = require("torch").nn.functional, self.kernels
        n, heads, d = ids.shape[0], self.n_heads, self.head_dim
        x, h = kern.add_rms_norm(self.inner.embed_tokens(ids), None, *self._fused_layers[0][0])
        for i, (layer, (_, post, nxt)) in enumerate(zip(self.layers, self._fused_layers, strict=True)):
            qkv = F.linear(h, *self._fused[i])  # (N, (H + 2 Hkv) d)
            q = kern.rope_store(qkv, self.cos, self.sin, pos, write, self.k[i], self.v[i], heads)  # (N, H, d)
            x, h = kern.add_rms_norm(x, layer.self_attn.o_proj(attend(i, q).reshape(n, heads * d)), *post)
            mlp = layer.mlp
            x, h = kern.add_rms_norm(x, mlp.down_proj(kern.silu_mul(mlp.gate_proj(h), mlp.up_proj(h))), *nxt)
        return h

    def _gather(self, cache: Any, table: Any) -> Any:
        """cache (Hkv, S, d), table (b, nblk) -> the blocks' keys or values (Hkv, b, nblk * B, d).

        Whole blocks are copied (B * d contiguous values each), not single tokens: a block
        gather moves the same bytes with B times fewer index computations."""
        b, nblk = table.shape
        blocks = cache.view(self.n_kv, self.num_blocks, self.block_size * self.head_dim)
        picked = blocks.index_select(1, table.reshape(-1))  # (Hkv, b * nblk, B * d)
        return picked.view(self.n_kv, b, nblk * self.block_size, self.head_dim)

    # ---- prefill --------------------------------------------------------------------------

    def prefill(self, segments: list[tuple[int, int, list[int]]]) -> Any:
        """Segments (row slot, first position, new token ids) -> logits of each segment's last token (s, V)."""
        torch = require("torch")
        ids, pos, rows, bounds = [], [], [], []
        for row, start, tokens in segments:
            bounds.append((len(ids), len(ids) + len(tokens), row, start))
            ids += tokens
            pos += range(start, start + len(tokens))
            rows += [row] * len(tokens)
        dev = self.device
        ids_t, pos_t, rows_t = torch.tensor([ids, pos, rows], dtype=torch.long).to(dev, non_blocking=True)
        bs = self.block_size
        write = self.tables[rows_t, pos_t // bs] * bs + pos_t % bs  # (N,)
        if self.kernels is not None:  # tiles of a segment's new tokens attend over their positions <= their own
            per = self.kernels.prefill_tile_tokens(self.n_heads, self.n_kv)
            tiles = [(t0, min(per, b - t0), row) for a, b, row, _ in bounds for t0 in range(a, b, per)]
            tiles_t = torch.tensor(list(zip(*tiles, strict=True)), dtype=torch.long).to(dev, non_blocking=True)
            lengths = pos_t + 1
            context = 256 << (max(pos) // 256).bit_length()  # few distinct values: one kernel build each

            fallback: list[Any] = []

            def attend(i: int, q: Any) -> Any:
                if self._prefill_kernel:
                    try:
                        return self.kernels.prefill_attention(q, self.k[i], self.v[i], self.tables, tiles_t, lengths,
                                                              self.scaling, block_size=bs, context=context,
                                                              tokens_per_tile=per)
                    except Exception as exc:  # a kernel build this GPU or Triton cannot run: slower, never wrong
                        log.warning("the prefill attention kernel failed (%s); prefill uses torch SDPA from now on",
                                    exc)
                        self._prefill_kernel = False
                fallback[:] = fallback or [self._prefill_attention(bounds, dev)]
                return fallback[0](i, q)
        else:
            attend = self._prefill_attention(bounds, dev)

        hidden = self._layers(ids_t, pos_t, write, attend)  # (N, D)
        last = torch.tensor([b - 1 for _, b, _, _ in bounds], dtype=torch.long).to(dev, non_blocking=True)
        return self.lm_head(hidden[last])  # (s, V)

    def _prefill_attention(self, bounds: list[tuple[int, int, int, int]], dev: Any) -> Any:
        """Plain-torch prefill attention: per segment, SDPA over its gathered context blocks, causal."""
        torch = require("torch")
        F = torch.nn.functional
        bs, contexts = self.block_size, []
        for a, b, row, start in bounds:
            t = b - a
            table = self.tables[row:row + 1, :-(-(start + t) // bs)]  # (1, nblk): the blocks the context spans
            width = table.shape[1] * bs
            causal = torch.arange(width, device=dev)[None, :] <= (start + torch.arange(t, device=dev))[:, None]
            contexts.append((a, b, table, causal.repeat(self.group, 1)))  # (G*T, W): rows ordered (g, t)

        def attend(i: int, q: Any) -> Any:
            out = torch.empty_like(q)
            for a, b, table, mask in contexts:
                t = b - a
                qs = q[a:b].view(t, self.n_kv, self.group, self.head_dim).permute(1, 2, 0, 3)  # (Hkv, G, T, d)
                qs = qs.reshape(1, self.n_kv, self.group * t, self.head_dim)
                keys = self._gather(self.k[i], table).transpose(0, 1)  # (1, Hkv, W, d)
                values = self._gather(self.v[i], table).transpose(0, 1)
                o = F.scaled_dot_product_attention(qs, keys, values, attn_mask=mask, scale=self.scaling)
                o = o.view(self.n_kv, self.group, t, self.head_dim).permute(2, 0, 1, 3)  # (T, Hkv, G, d)
                out[a:b] = o.reshape(t, self.n_heads, self.head_dim)
            return out

        return attend

    # ---- decode ---------------------------------------------------------------------------

    def _decode(self, ids: Any, pos: Any, rows: Any, nblk: int) -> Any:
        """Token ids, positions, row slots (b,) -> next-token logits (b, V). Graph-safe."""
        torch = require("torch")
        bs, length = self.block_size, nblk * self.block_size
        table = self.tables[rows, :nblk]  # (b, nblk)
        write = table.gather(1, (pos // bs)[:, None])[:, 0] * bs + pos % bs  # (b,)
        b = ids.shape[0]
        if self.kernels is not None:
            lengths = pos + 1

            def attend(i: int, q: Any) -> Any:  # K/V read in place through the block tables
                return self.kernels.paged_attention(q, self.k[i], self.v[i], table, lengths, self.scaling,
                                                    block_size=bs, context=length)
        else:
            invalid = (torch.arange(length, device=self.device)[None, :] > pos[:, None])[None, :, None, :]  # (1, b, 1, L)

            def attend(i: int, q: Any) -> Any:
                # Plain matmuls over gathered blocks: one query per head and few sequences give a fused
                # SDPA kernel only Hkv * b thread blocks to walk L keys each, while batched GEMMs split L too.
                qs = q.view(b, self.n_kv, self.group, self.head_dim).transpose(0, 1)  # (Hkv, b, G, d)
                keys, values = self._gather(self.k[i], table), self._gather(self.v[i], table)  # (Hkv, b, L, d)
                scores = torch.matmul(qs, keys.transpose(-1, -2)).float() * self.scaling  # (Hkv, b, G, L)
                probs = scores.masked_fill(invalid, float("-inf")).softmax(dim=-1).to(values.dtype)
                return torch.matmul(probs, values).transpose(0, 1).reshape(b, self.n_heads, self.head_dim)

        return self.lm_head(self._layers(ids, pos, write, attend))  # (b, V)

    def decode(self, ids: list[int], pos: list[int], rows: list[int], params: list[list[float]],
               seeds: list[list[int]], mode: str = "dist", src: list[int] | None = None) -> DecodeStep:
        """Launch one decode step for b sequences, sampled; see `DecodeStep` for its results (token ids,
        their logprobs, and the distributions (b, V) in the 'dist' mode of `sampling_mode`).

        params = [temperatures, top_ps], seeds = [seeds, token indices], each of length b. src[i] >= 0
        feeds row i the token that the previous decode step sampled in its row src[i] (ids[i] is then
        ignored): the caller need not wait for that step's results before launching this one.
        """
        torch = require("torch")
        b = len(ids)
        src = src if src is not None else [-1] * b
        need = -(-(max(pos) + 1) // self.block_size)
        if not self.use_graphs:
            inp = torch.tensor([ids, pos, rows, *seeds, src], dtype=torch.long).to(self.device)
            out = self._step(inp, torch.tensor(params, device=self.device), need, mode)
            return DecodeStep(*out, b, self._staging.next()[2:] if self._staging is not None else None)
        bucket = next((x for x in BATCH_BUCKETS if x >= b), b)
        nblk = min(self.max_blocks, 1 << max(4, (need - 1).bit_length()))  # contexts of 256, 512, ... tokens
        graph = self._graphs.get((bucket, nblk, mode)) or self._capture(bucket, nblk, mode)
        if graph is None:  # capture failed: decode eagerly from now on
            return self.decode(ids, pos, rows, params, seeds, mode, src)
        pad = bucket - b
        staging = self._staging.next()
        host_inp, host_params = staging[0][:6 * bucket].view(6, bucket), staging[1][:2 * bucket].view(2, bucket)
        host_inp.copy_(torch.tensor([ids + [0] * pad, pos + [0] * pad, rows + [self.max_rows] * pad,
                                     seeds[0] + [0] * pad, seeds[1] + [0] * pad, src + [-1] * pad], dtype=torch.long))
        host_params.copy_(torch.tensor([params[0] + [1.0] * pad, params[1] + [1.0] * pad]))
        graph.inp.copy_(host_inp, non_blocking=True)  # pinned: the copy never waits for the step in flight
        graph.params.copy_(host_params, non_blocking=True)
        graph.graph.replay()
        picked, chosen, logp = graph.out
        return DecodeStep(picked, chosen, None if logp is None else logp[:b], b, staging[2:])

    def _step(self, inp: Any, params: Any, nblk: int, mode: str, last: Any = None) -> tuple[Any, Any, Any]:
        """inp (6, b): ids, positions, row slots, seeds, token indices, source rows (-1: use ids).
        The sampled ids go to `last` (default: `self._last`, which the next step's source rows read)."""
        torch = require("torch")
        src = inp[5]
        ids = torch.where(src >= 0, self._last[src.clamp(min=0)], inp[0])
        out = sample(self._decode(ids, inp[1], inp[2], nblk), params, inp[3:5], mode, self.kernels)
        (self._last if last is None else last)[:ids.shape[0]].copy_(out[0])
        return out

    def _capture(self, bucket: int, nblk: int, mode: str) -> _Graph | None:
        try:
            with _CAPTURE_LOCK:  # one capture at a time per process (a server may hold several engines)
                return self._try_capture(bucket, nblk, mode)
        except Exception as exc:  # a driver or library that cannot capture: slower, never wrong
            log.warning("CUDA graph capture failed (%s); paged decoding runs eagerly from now on", exc)
            self.use_graphs = False
            self._graphs.clear()
            return None

    def _try_capture(self, bucket: int, nblk: int, mode: str) -> _Graph:
        torch = require("torch")
        inp = torch.zeros(6, bucket, dtype=torch.long, device=self.device)
        inp[2] = self.max_rows  # every row pads: writes go to scratch while warming up and capturing
        inp[5] = -1
        params = torch.ones(2, bucket, device=self.device)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        # A capture happens while a decode step may be in flight whose sampled ids (`_last`) the next
        # step reads on the device: the warm-up steps, which really run, write theirs elsewhere.
        scratch = torch.empty_like(self._last)
        with torch.cuda.stream(stream):
            for _ in range(2):  # warm up kernels and allocator outside the capture
                self._step(inp, params, nblk, mode, last=scratch)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        # thread_local: other threads of the server (a frozen static-model copy, the event loop) may use
        # CUDA while this one captures
        with torch.cuda.graph(graph, pool=self._pool, capture_error_mode="thread_local"):
            out = self._step(inp, params, nblk, mode)
        self._graphs[(bucket, nblk, mode)] = captured = _Graph(graph, inp, params, out)
        return captured
