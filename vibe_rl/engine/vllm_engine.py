"""The vLLM engine (`model.engine: vllm`): vLLM generates, the torch trainer trains, weights sync in between.

- Generation (`vllm_runner.VLLMGeneration`): a worker thread drives a vLLM `LLMEngine` step by step,
  streaming tokens; logprobs are vLLM's processed ones (the distribution the token was drawn from, as
  `rl.logprobs.sampling_logprobs`).
- Training: a `TorchEngine` on the same model (simple generator, never used to generate) runs GRPO/SFT.
- Weight sync after every applied step, `load`, and `sync_weights()`: a queued call the worker runs
  once no request is running (requests queued behind it wait, so every Generation comes from one
  version, the one it carries). In one process (no tensor parallelism) the trainer's tensors go in
  place through `collective_rpc("reload_weights", weights_iterator=...)`; with worker processes
  (tensor_parallel_size > 1) through a safetensors directory (`weights_path`). Then the prefix cache is
  reset: KV computed by the old weights must not be reused.
- A failed sync: the full trainer weights are sent again; if that fails too, vLLM is rebuilt from the
  trainer's weights written to disk. Only when that fails is the engine marked down: every later call
  raises EngineError saying so (restart the server: it resumes from the latest checkpoint).
"""

from __future__ import annotations

import gc
import logging
import random
import shutil
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vibe_rl.engine import vllm_setup as vs
from vibe_rl.engine.vllm_runner import VLLMGeneration
from vibe_rl.errors import ConfigError, EngineError, ModelLoadError
from vibe_rl.extras import require

if TYPE_CHECKING:
    from vibe_rl.rl.samples import Sample
    from vibe_rl.schema import EngineConfig, TrainConfig

log = logging.getLogger(__name__)


class VLLMEngine(VLLMGeneration):
    """Engine protocol with vLLM generating and the torch trainer training (see the module docstring)."""

    def __init__(self, config: EngineConfig, train: TrainConfig | None = None, trainable: bool = True):
        from vibe_rl.engine.loader import resolve_device, resolve_model_path
        from vibe_rl.engine.torch_engine import TorchEngine

        require("torch", "the vLLM engine's trainer")
        require("vllm", "the vLLM engine")
        if trainable and config.lora.rank > 0:
            raise ConfigError("model.engine vllm syncs full weights only; LoRA (model.lora.rank > 0) is not "
                              "supported with it yet. Use model.engine: torch for LoRA, or model.lora.rank: 0.")
        self.config, self.trainable = config, trainable
        self.path = resolve_model_path(config.path, config.cache_dir)
        self.device = resolve_device(config.device)
        # the trainer (trainable only: a frozen engine holds no torch copy of the weights)
        self.trainer = TorchEngine(config.model_copy(update={"engine": "torch", "generator": "simple"}), train,
                                   trainable=True) if trainable else None
        if self.trainer is not None:
            self.tokenizer, self.eos_ids = self.trainer.tokenizer, self.trainer.eos_ids
            self.max_model_len, self.vocab_size = self.trainer.max_model_len, self.trainer.vocab_size
        else:
            self.tokenizer, self.eos_ids, self.max_model_len, self.vocab_size = vs.model_facts(self.path, config)
        self.version = 0
        self.in_process = config.tensor_parallel_size == 1
        self.args = vs.engine_args(config, self.path, self.device, self.max_model_len)
        self.stats = {"requests": 0, "generated_tokens": 0, "largest_batch": 0, "weight_syncs": 0,
                      "prefix_cache_resets": 0, "prompt_tokens": 0, "prefix_hit_tokens": 0, "failed_syncs": 0, "rebuilds": 0}
        self.last_sync_s = 0.0
        self._rng = random.Random(config.seed)
        self._sync_dir = Path(tempfile.mkdtemp(prefix="vibe-rl-vllm-sync-"))
        self._down: str | None = None
        vs.apply_env(vs.process_env(config, self.device))
        try:
            self.llm = vs.build_llm_engine(self.args)
        except Exception as exc:  # vLLM's own errors are long; say what to check, keep them as the cause
            if self.trainer is not None:
                self.trainer.close()
            shutil.rmtree(self._sync_dir, ignore_errors=True)
            raise ModelLoadError(
                f"vLLM could not start on {self.path}: {type(exc).__name__}: {str(exc)[:500]}. Check that vLLM "
                "supports its architecture and that model.max_model_len and the KV cache (model.kv_cache_gb, "
                "model.gpu_memory_utilization) fit the machine; model.engine: torch runs any causal LM.") from exc
        self._start_worker()

    # ---- weights ----------------------------------------------------------------------------

    def sync_weights(self, weights: Iterable[tuple[str, Any]] | None = None) -> float:
        """Send the trainer's weights (or `weights`: (HF name, tensor) pairs) to vLLM and reset its prefix
        cache; returns the seconds it took. On failure see the module docstring (resend, rebuild, down)."""
        self._require_trainer()
        return self._call(lambda: self._sync_now(weights))

    def _sync_now(self, weights: Iterable[tuple[str, Any]] | None) -> float:
        t0 = time.monotonic()
        try:
            self._reload(weights)
        except Exception as first:
            self.stats["failed_syncs"] += 1
            log.warning("vLLM weight sync failed (%s: %s); sending the trainer's full weights again",
                        type(first).__name__, first)
            try:
                self._reload(None)
            except Exception as second:
                log.warning("resending failed too (%s); rebuilding vLLM from the trainer's weights", second)
                self._rebuild(second)
        self.version = self.trainer.version
        self.stats["weight_syncs"] += 1
        self.last_sync_s = time.monotonic() - t0
        return self.last_sync_s

    def _reload(self, weights: Iterable[tuple[str, Any]] | None) -> None:
        if self.in_process:
            pairs = weights if weights is not None else vs.trainer_weights(self.trainer.model)
            self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": iter(pairs)})
        else:  # worker processes: through a directory (tensors sent over RPC arrive as lists)
            self.llm.collective_rpc("reload_weights", kwargs={"weights_path": str(self._write_weights(weights))})
        if not self.llm.reset_prefix_cache():
            raise EngineError("vLLM refused to reset its prefix cache (requests still running)")
        self.stats["prefix_cache_resets"] += 1

    def _write_weights(self, weights: Iterable[tuple[str, Any]] | None) -> Path:
        from safetensors.torch import save_file

        target = self._sync_dir / "weights"
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        pairs = weights if weights is not None else vs.trainer_weights(self.trainer.model)
        tensors, seen = {}, set()
        for name, tensor in pairs:  # tied embeddings share storage, which safetensors refuses: copy the second
            tensor = tensor.contiguous().cpu()
            key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset())
            tensors[name] = tensor.clone() if key in seen else tensor
            seen.add(key)
        save_file(tensors, str(target / "model.safetensors"))
        return target

    def _rebuild(self, cause: BaseException) -> None:
        """A fresh vLLM from the trainer's weights on disk; marks the engine down when that fails too."""
        self.stats["rebuilds"] += 1
        try:
            model_dir = self._sync_dir / "model"
            shutil.rmtree(model_dir, ignore_errors=True)
            self.trainer.model.save_pretrained(str(model_dir), safe_serialization=True)
            self._shutdown_llm()
            self.llm = vs.build_llm_engine({**self.args, "model": str(model_dir)})
        except Exception as exc:
            self._down = (f"The vLLM engine is down: a weight sync failed ({type(cause).__name__}: {cause}) and "
                          f"rebuilding vLLM from the trained weights failed too ({type(exc).__name__}: {exc}). "
                          "Restart the server; it resumes from the latest checkpoint.")
            raise EngineError(self._down) from exc

    def _shutdown_llm(self) -> None:
        llm, self.llm = self.llm, None
        core = getattr(llm, "engine_core", None)
        try:
            if core is not None and hasattr(core, "shutdown"):
                core.shutdown()
        except Exception:
            log.exception("shutting vLLM down failed")
        del llm
        gc.collect()

    # ---- training and checkpoints -----------------------------------------------------------

    def _require_trainer(self) -> None:
        if self.trainer is None:
            raise EngineError("This vLLM engine was loaded with trainable=False (a frozen model); it cannot train "
                              "or change its weights.")

    def train(self, samples: list[Sample]) -> dict[str, float]:
        """One GRPO step on the trainer, then (when it was applied) the weight sync; version += 1."""
        self._require_trainer()
        metrics = self.trainer.train(samples)
        if self.trainer.version != self.version:
            metrics["weight_sync_s"] = self.sync_weights()
        return metrics

    def sft(self, conversations: list[list[dict]]) -> dict[str, float]:
        self._require_trainer()
        metrics = self.trainer.sft(conversations)
        if self.trainer.version != self.version:
            metrics["weight_sync_s"] = self.sync_weights()
        return metrics

    @property
    def step(self) -> int:
        return self.trainer.step if self.trainer is not None else 0

    def save(self, directory: str | Path) -> Path:
        self._require_trainer()
        return self.trainer.save(directory)

    def load(self, directory: str | Path) -> None:
        self._require_trainer()
        self.trainer.load(directory)
        self.sync_weights()

    def close(self) -> None:
        if self._closed:
            return
        self._stop_worker()
        self._shutdown_llm()
        if self.trainer is not None:
            self.trainer.close()
        shutil.rmtree(self._sync_dir, ignore_errors=True)

    def __enter__(self) -> VLLMEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
