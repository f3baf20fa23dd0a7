"""Building vLLM for the vLLM engine: engine arguments from `EngineConfig`, sampling, weight transfer.

vLLM is imported lazily (`vibe_rl.extras.require`); nothing here runs at import time.

- Arguments: `logprobs_mode="processed_logprobs"` (the logprob of the distribution the token was drawn
  from, after temperature and top-p: `rl.logprobs.sampling_logprobs`), prefix caching on, the model's dtype
  ('auto': float32 on CPU, bfloat16 on a GPU, as the torch engine), `tensor_parallel_size` as configured.
  One process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`) when there is no tensor parallelism, so weights pass
  in place; worker processes otherwise, and weights go through a checkpoint directory.
- CPU: the KV cache is `VLLM_CPU_KVCACHE_SPACE` GiB (from `model.kv_cache_gb`, 0: 1 GiB; vLLM's own default
  takes most of the machine's memory); torch threads follow `model.cpu_threads` (0: one thread, as
  the torch engine does for small models: `OMP_NUM_THREADS=1`), else vLLM's OpenMP threads contend with
  the trainer's.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from vibe_rl.engine.base import SamplingParams
from vibe_rl.errors import ConfigError
from vibe_rl.extras import require

if TYPE_CHECKING:
    from pathlib import Path

    from vibe_rl.schema import EngineConfig


def engine_args(config: EngineConfig, path: Path, device: str, max_model_len: int) -> dict[str, Any]:
    """The keyword arguments of vLLM's `EngineArgs` for this config (plain data: tests read them)."""
    dtype = config.dtype if config.dtype != "auto" else ("float32" if device == "cpu" else "bfloat16")
    args: dict[str, Any] = dict(
        model=str(path), tokenizer=str(path), dtype=dtype, seed=config.seed, max_model_len=max_model_len,
        max_num_seqs=config.max_batch_size, enable_prefix_caching=True, logprobs_mode="processed_logprobs",
        max_logprobs=20, tensor_parallel_size=config.tensor_parallel_size, disable_log_stats=True,
    )
    if config.tensor_parallel_size > 1:
        args["distributed_executor_backend"] = "mp"
    if device == "cpu":
        args["enforce_eager"] = True
    else:
        args["gpu_memory_utilization"] = config.gpu_memory_utilization
        if config.kv_cache_gb > 0:
            args["kv_cache_memory_bytes"] = int(config.kv_cache_gb * (1 << 30))
    return args


def process_env(config: EngineConfig, device: str) -> dict[str, str]:
    """Environment variables vLLM reads when it starts (set before the engine is built)."""
    env = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0" if config.tensor_parallel_size == 1 else "1",
           "VLLM_USE_FLASHINFER_SAMPLER": "0",  # flashinfer's sampler would JIT-compile at start
           # vLLM logs to stdout by default: with the server's own logs instead, so a benchmark's stdout stays its JSON
           "VLLM_LOGGING_STREAM": os.environ.get("VLLM_LOGGING_STREAM", "ext://sys.stderr")}
    if device == "cpu" and config.tensor_parallel_size > 1 and not os.environ.get("VLLM_CPU_OMP_THREADS_BIND"):
        binding = _cpu_binding(config.tensor_parallel_size)  # vLLM binds a worker per NUMA node unless told
        if binding:
            env["VLLM_CPU_OMP_THREADS_BIND"] = binding
    if device == "cpu":
        env["VLLM_CPU_KVCACHE_SPACE"] = str(max(1, round(config.kv_cache_gb))) if config.kv_cache_gb else "1"
        env.setdefault("OMP_NUM_THREADS", str(config.cpu_threads or 1))
    return env


def _cpu_binding(workers: int) -> str | None:
    """'0-3|4-7'-style core ranges, one per CPU worker, from the cores this process may use (None: too few)."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    if len(cores) < workers:
        return None
    per = len(cores) // workers
    groups = [cores[i * per:(i + 1) * per] for i in range(workers)]
    if any(g != list(range(g[0], g[-1] + 1)) for g in groups):
        return None  # not contiguous: leave it to vLLM
    return "|".join(str(g[0]) if len(g) == 1 else f"{g[0]}-{g[-1]}" for g in groups)


def apply_env(env: dict[str, str]) -> None:
    for key, value in env.items():
        if key == "OMP_NUM_THREADS" and os.environ.get(key):
            continue  # the user's own setting wins
        os.environ[key] = value
    envs = sys.modules.get("vllm.envs")  # imported only if an engine was built before in this process
    if envs is not None and hasattr(envs, "disable_envs_cache"):
        # vLLM freezes its environment reads once an engine has started in a process: a second engine (a tensor-
        # parallel one after a single-process one) would otherwise start with the first one's settings
        envs.disable_envs_cache()


def model_facts(path: Path, config: EngineConfig) -> tuple[Any, set[int], int, int]:
    """(tokenizer, EOS ids, max_model_len, vocab size) of the model at `path`, without loading its weights."""
    from types import SimpleNamespace

    from vibe_rl.engine.loader import load_tokenizer
    from vibe_rl.engine.torch_engine import _eos_ids

    transformers = require("transformers", "the vLLM engine")
    tokenizer = load_tokenizer(path)
    hf = transformers.AutoConfig.from_pretrained(str(path))
    hf = hf.get_text_config() if hasattr(hf, "get_text_config") else hf
    try:
        generation = transformers.GenerationConfig.from_pretrained(str(path))
    except OSError:  # no generation_config.json
        generation = None
    eos = _eos_ids(tokenizer, SimpleNamespace(generation_config=generation))
    limit = getattr(hf, "max_position_embeddings", None) or config.max_model_len
    return tokenizer, eos, min(config.max_model_len, int(limit)), int(getattr(hf, "vocab_size", None) or len(tokenizer))


def build_llm_engine(args: dict[str, Any]) -> Any:
    """A vLLM `LLMEngine` (V1: driven step by step from the caller's thread)."""
    vllm = require("vllm", "the vLLM engine")
    from vllm.engine.arg_utils import EngineArgs

    return vllm.LLMEngine.from_engine_args(EngineArgs(**args))


def vllm_sampling(sampling: SamplingParams, seed: int, budget: int, eos_ids: set[int]) -> Any:
    """vLLM's SamplingParams for one request: tokens stream as deltas, the stop string stays in the output."""
    require("vllm", "the vLLM engine")
    from vllm import SamplingParams as VSampling
    from vllm.sampling_params import RequestOutputKind

    return VSampling(
        n=1, temperature=sampling.temperature, top_p=sampling.top_p, max_tokens=budget, seed=seed,
        stop=list(sampling.stop) or None, include_stop_str_in_output=True, stop_token_ids=sorted(eos_ids),
        ignore_eos=False, logprobs=sampling.top_logprobs, skip_special_tokens=False,
        detokenize=bool(sampling.stop),  # text only for stop strings (the server decodes ids itself)
        output_kind=RequestOutputKind.DELTA,
    )


def trainer_weights(model: Any) -> Iterator[tuple[str, Any]]:
    """(name, tensor) pairs of the trainer's model under the Hugging Face checkpoint names vLLM loads.

    Tied embeddings: `lm_head.weight` is always passed beside `model.embed_tokens.weight`. vLLM's
    in-place reload re-processes each layer from what it is given; given only the embedding, its
    lm_head (a separate, packed layer on CPU) keeps the old weights and the logprobs drift (seen
    on the tiny model: -6.05 instead of -5.61 after scaling the embedding).
    """
    if hasattr(model, "get_base_model"):
        raise ConfigError("The vLLM engine syncs full weights only; LoRA (model.lora.rank > 0) is not supported "
                          "with engine vllm yet. Use model.engine: torch for LoRA, or model.lora.rank: 0.")
    state = model.state_dict()
    for name, tensor in state.items():
        yield name, tensor.detach()
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if "lm_head.weight" not in state and head is not None:
        yield "lm_head.weight", head.weight.detach()


def sampled_logprobs(entries: list[dict[int, Any]], token_ids: list[int]) -> list[float]:
    """The sampled token's logprob at each position (vLLM lists it whether or not it is in the top-k)."""
    return [float(entry[token].logprob) for entry, token in zip(entries, token_ids, strict=True)]


def top_entries(entry: dict[int, Any], k: int) -> list[tuple[int, float]]:
    """The k most likely (id, logprob) pairs at one position, finite ones only, most likely first."""
    ranked = sorted(((lp.rank, tid, float(lp.logprob)) for tid, lp in entry.items() if lp.rank is not None
                     and lp.rank <= k), key=lambda r: r[0])
    seen: list[tuple[int, float]] = []
    for _, tid, value in ranked:
        if value != float("-inf") and all(tid != s for s, _ in seen):
            seen.append((tid, value))
    return seen[:k]

