"""Random-init models of real Qwen2.5 shapes, built offline around the tiny model's tokenizer.

For benchmarks and GPU runs on machines without a model hub: the layer count,
widths, heads and (by default) the 151,936-token vocabulary are those of the
published Qwen2.5 checkpoints, so memory and speed match the real model; the
weights are random. `vocab="tokenizer"` shrinks the vocabulary to the tiny
tokenizer's (every sampled id then decodes to text, which a chat workload needs).
`arch="phi3"` builds a Phi3ForCausalLM of the same dimensions instead: an architecture the embedded paged
engine does not drive (fused qkv and gate/up projections), so `model.engine: auto` serves it with vLLM.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Literal

from vibe_rl.errors import ConfigError
from vibe_rl.extras import require

QWEN_VOCAB = 151_936
SHAPES: dict[str, dict[str, int | bool]] = {  # Qwen2.5 configs (hidden, layers, heads, kv heads, MLP width)
    "0.5b": dict(hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                 intermediate_size=4864, tie_word_embeddings=True),
    "1.5b": dict(hidden_size=1536, num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2,
                 intermediate_size=8960, tie_word_embeddings=True),
    "3b": dict(hidden_size=2048, num_hidden_layers=36, num_attention_heads=16, num_key_value_heads=2,
               intermediate_size=11008, tie_word_embeddings=True),
    "7b": dict(hidden_size=3584, num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4,
               intermediate_size=18944, tie_word_embeddings=False),
    "14b": dict(hidden_size=5120, num_hidden_layers=48, num_attention_heads=40, num_key_value_heads=8,
                intermediate_size=13824, tie_word_embeddings=False),
}
ARCHS = ("qwen2", "phi3")


def build_random_model(shape: str, directory: str | Path, *, vocab: Literal["qwen", "tokenizer"] = "qwen",
                       dtype: str = "bfloat16", seed: int = 0, device: str = "cpu", arch: str = "qwen2") -> int:
    """Write a random Qwen2ForCausalLM (or `arch`) of `shape` plus the tiny tokenizer to `directory`;
    returns parameters. `shape` 'tiny' is the tiny model's dimensions."""
    if shape not in SHAPES and shape != "tiny":
        raise ConfigError(f"Unknown model shape '{shape}'. Choose one of: tiny, {', '.join(SHAPES)}.")
    if arch not in ARCHS:
        raise ConfigError(f"Unknown architecture '{arch}'. Choose one of: {', '.join(ARCHS)}.")
    torch = require("torch", "building a random model")
    transformers = require("transformers", "building a random model")
    from vibe_rl.engine.tiny import MODEL_CONFIG, ensure_tiny_model

    tiny = ensure_tiny_model()
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    for f in tiny.iterdir():  # tokenizer files (the tiny model's weights and config are rewritten below)
        if f.is_file() and (f.name.startswith("tokenizer") or f.name in ("special_tokens_map.json", "vocab.json",
                                                                        "merges.txt", "chat_template.jinja")):
            shutil.copy(f, out / f.name)
    tok = transformers.AutoTokenizer.from_pretrained(str(tiny))
    dims = dict(SHAPES[shape]) if shape != "tiny" else {
        k: MODEL_CONFIG[k] for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                                     "intermediate_size", "tie_word_embeddings")}
    n_layers = int(dims["num_hidden_layers"])
    common = dict(vocab_size=QWEN_VOCAB if vocab == "qwen" else -(-len(tok) // 64) * 64, max_position_embeddings=32768,
                  rope_theta=1_000_000.0, eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
                  pad_token_id=tok.pad_token_id, bos_token_id=None, **dims)
    if arch == "phi3":
        config, cls = transformers.Phi3Config(rms_norm_eps=1e-5, **common), transformers.Phi3ForCausalLM
    else:
        config = transformers.Qwen2Config(rms_norm_eps=1e-6, use_sliding_window=False,
                                          layer_types=["full_attention"] * n_layers, **common)
        cls = transformers.Qwen2ForCausalLM
    torch.manual_seed(seed)
    with torch.device(device):
        model = cls(config).to(getattr(torch, dtype))
    model.generation_config.eos_token_id = config.eos_token_id
    model.save_pretrained(out, safe_serialization=True)
    return sum(p.numel() for p in model.parameters())
