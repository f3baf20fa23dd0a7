"""Choosing the generation path of a TorchEngine and sizing its paged KV cache.

`model.generator`: 'auto' takes the paged path on a GPU and the simple loop on
CPU (where a tiny model is bound by Python overhead, not by memory traffic);
'paged' asks for the paged path anywhere; 'simple' never uses it. A model the
paged runner cannot drive falls back to the simple loop with a logged reason
under 'auto', and is an error under 'paged'.

KV cache size (`model.kv_cache_gb`, 0 = automatic): on a GPU a quarter of the
memory free after the weights (and optimizer) are loaded — training activations
need the rest — but never more than `max_batch_size` sequences of `max_model_len`
tokens need; on CPU the same cap, at most 1 GiB.
"""

from __future__ import annotations

import logging
from typing import Any

from vibe_rl.errors import ConfigError
from vibe_rl.extras import require

log = logging.getLogger(__name__)
GIB = 1 << 30


def make_paged_generator(engine: Any) -> Any:
    """A PagedGenerator for `engine` (a TorchEngine), or None when the simple loop serves it."""
    from vibe_rl.engine.paged import PagedGenerator
    from vibe_rl.engine.paged_model import unsupported_reason

    cfg = engine.config
    if cfg.generator == "auto" and engine.device == "cpu":
        return None
    reason = unsupported_reason(engine.model)
    if reason:
        if cfg.generator == "paged":
            raise ConfigError(f"model.generator is 'paged' but {reason}. Use model.generator: simple (or auto).")
        log.warning("paged generation is off: %s; using the simple batched loop", reason)
        return None
    gen = PagedGenerator(engine.model, engine.tokenizer, eos_ids=engine.eos_ids, max_model_len=engine.max_model_len,
                         max_rows=cfg.max_batch_size, kv_cache_bytes=_kv_bytes(engine),
                         block_size=cfg.block_size, prefill_chunk=cfg.prefill_chunk, cuda_graphs=cfg.cuda_graphs,
                         fused_kernels=cfg.fused_kernels)
    log.info("paged generation: %.2f GiB KV cache (%d blocks of %d tokens), CUDA graphs %s, fused kernels %s",
             gen.kv_cache_bytes / GIB, gen.blocks.num_blocks, cfg.block_size, "on" if gen.runner.use_graphs else "off",
             "on" if gen.runner.kernels is not None else "off")
    return gen


def _kv_bytes(engine: Any) -> int:
    from vibe_rl.engine.paged_model import kv_bytes_per_token

    cfg = engine.config
    if cfg.kv_cache_gb > 0:
        return int(cfg.kv_cache_gb * GIB)
    per_token = kv_bytes_per_token(engine.model)
    enough = (cfg.max_batch_size * (engine.max_model_len + cfg.block_size) + cfg.block_size) * per_token
    if engine.device == "cpu":
        return min(enough, GIB)
    torch = require("torch")
    free, _ = torch.cuda.mem_get_info(torch.device(engine.device))
    return min(enough, free // 4)
