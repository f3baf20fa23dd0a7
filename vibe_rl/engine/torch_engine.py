"""The embedded torch engine: transformers model, batched generation, GRPO training.

A background worker thread owns generation: it takes every queued request (up
to `max_batch_size`) into a batch; requests that arrive while it runs join it
between decode steps (or, where the model's KV cache cannot be extended, the
next batch), and each request's future resolves as soon as its row finishes.
`train`, `save` and `load` take the same lock: once one of them waits, the
running batch stops taking newcomers, finishes, and the weights change only
between batches; requests queued meanwhile wait for the next one.

Too-long inputs: a prompt of `max_model_len` tokens or more raises
SequenceTooLongError at `submit`; a response stops at `max_model_len` with
finish_reason "length"; a training sample longer than `max_model_len` is
truncated from the right (its loss mask and logprobs with it) and counted in
the metrics as `truncated_samples` / `truncated_loss_tokens`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import queue
import random
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vibe_rl.engine.base import Generation, SamplingParams, TokenCallback
from vibe_rl.engine.generate import Request, checked_prompt, generate_batch
from vibe_rl.engine.loader import (
    enable_checkpointing,
    load_causal_lm,
    load_tokenizer,
    resolve_device,
    resolve_dtype,
    resolve_model_path,
)
from vibe_rl.engine.paged_setup import make_paged_generator
from vibe_rl.errors import EngineError, RequestRejectedError
from vibe_rl.extras import require

if TYPE_CHECKING:
    from vibe_rl.rl.samples import Sample
    from vibe_rl.schema import EngineConfig, TrainConfig

log = logging.getLogger(__name__)
COALESCE_S = 0.005  # after the first request arrives, wait this long for others to join its batch


class TorchEngine:
    """Engine protocol on transformers (+ optional peft LoRA); CPU fp32 or GPU bf16."""

    def __init__(self, config: EngineConfig, train: TrainConfig | None = None, trainable: bool = True,
                 model: Any = None):
        """`model`: serve this already loaded (and LoRA-wrapped) model instead of loading `config.path`: a
        multi-GPU server without generation replicas serves its sharded training model (dist_engine)."""
        from vibe_rl.schema import TrainConfig

        torch = require("torch", "the torch engine")
        self.config, self.train_config, self.trainable = config, train or TrainConfig(), trainable
        torch.manual_seed(config.seed)
        self.path = resolve_model_path(config.path, config.cache_dir)
        self.device = resolve_device(config.device)
        self.dtype = resolve_dtype(config.dtype, self.device)
        prepared = model is not None
        self.model = model if prepared else load_causal_lm(self.path, self.device, self.dtype)  # first: its errors say more
        self.tokenizer = load_tokenizer(self.path)
        self.lora = trainable and config.lora.rank > 0
        if trainable and self.train_config.gradient_checkpointing and not prepared:  # active in train() mode only
            enable_checkpointing(self.model)
        if self.lora and not prepared:
            self.model = _wrap_lora(self.model, config)
        self.model.eval()
        if not trainable:
            self.model.requires_grad_(False)
        limit = getattr(self.model.config, "max_position_embeddings", None) or config.max_model_len
        self.max_model_len = min(config.max_model_len, int(limit))
        self.vocab_size = int(self.model.get_input_embeddings().weight.shape[0])
        self.eos_ids = _eos_ids(self.tokenizer, self.model)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else min(self.eos_ids)
        self.cpu_threads = _cpu_threads(config, self.device, self.model)
        self.version = 0
        self.step = 0
        self.nan_skipped_total = 0
        self.optimizer = self._make_optimizer() if trainable else None
        self.ref_model = self._make_ref_model() if trainable else None
        self.paged = make_paged_generator(self) if config.generator != "simple" else None
        self._rng = random.Random(config.seed)
        self.stats = {"batches": 0, "requests": 0, "generated_tokens": 0, "largest_batch": 0, "joined_requests": 0}
        self._lock = threading.Lock()  # held by a running batch, train, save and load
        self._count_lock = threading.Lock()
        self._exclusive_waiting = 0
        self._stopping = False
        self._isolating = False  # retrying a failed batch's requests one by one: nobody joins
        self._joined: list[Request] = []
        self._queue: queue.Queue[Request | None] = queue.Queue()
        self._closed = False
        self._worker = threading.Thread(target=self._serve, name="vibe-rl-engine", daemon=True)
        self._worker.start()

    # ---- generation -------------------------------------------------------------------------

    def submit(self, prompt_ids: list[int], sampling: SamplingParams | None = None,
               on_token: TokenCallback | None = None) -> Future[Generation]:
        if self._closed:
            raise EngineError("The engine is closed; build a new one with load_engine(...).")
        sampling = sampling or SamplingParams()
        prompt_ids = checked_prompt(prompt_ids, self.max_model_len, self.vocab_size)
        seed = sampling.seed if sampling.seed is not None else self._rng.getrandbits(62)
        request = Request(prompt_ids, sampling, seed, on_token=on_token)
        self._queue.put(request)
        return request.future

    def generate(self, prompt_ids: list[int], sampling: SamplingParams | None = None) -> Generation:
        return self.submit(prompt_ids, sampling).result()

    def _serve(self) -> None:
        if self.cpu_threads:
            require("torch").set_num_threads(self.cpu_threads)  # applies to this (the worker) thread
        while not self._stopping:
            first = self._queue.get()
            if first is None:
                return
            batch = [first] + self._take(self.config.max_batch_size - 1, wait_s=COALESCE_S)
            batch = [r for r in batch if r.future.set_running_or_notify_cancel()]
            if not batch:
                continue
            self._joined: list[Request] = []
            shadows = [_shadow(r) for r in batch]
            try:
                with self._lock:
                    self._generate(shadows)
            except Exception:  # one request's fault must not fail the others: retry each unfinished one alone
                log.exception("generation batch of %d request(s) failed; retrying them one by one", len(batch))
                self._retry_alone(shadows + self._joined)

    def _retry_alone(self, shadows: list[Request]) -> None:
        """After a failed batch: each request that did not finish runs again alone, so only the culprit
        fails. A request that already streamed tokens is failed rather than restarted."""
        self._isolating = True
        try:
            for sh in shadows:
                caller = sh.origin  # type: ignore[attr-defined]
                if caller.future.done():
                    continue
                if sh.emitted:  # type: ignore[attr-defined]
                    caller.future.set_exception(sh.future.exception() or EngineError("generation failed"))
                    continue
                alone = _shadow(caller)
                try:
                    with self._lock:
                        self._generate([alone])
                except Exception as exc:
                    if not caller.future.done():
                        caller.future.set_exception(exc)
        finally:
            self._isolating = False

    def _generate(self, batch: list[Request]) -> None:
        """Decode `batch` and the requests that join it; the caller holds the weights lock."""
        if self.paged is not None:
            self.paged.run(batch, version=self.version, poll=self._poll, stats=self.stats)
        else:
            generate_batch(self.model, self.tokenizer, batch, eos_ids=self.eos_ids, pad_id=self.pad_id,
                           max_model_len=self.max_model_len, version=self.version,
                           max_batch_size=self.config.max_batch_size, poll=self._poll, stats=self.stats)

    def _weights_changed(self) -> None:
        """Cached KV of the old weights must not be reused."""
        if self.paged is not None:
            self.paged.invalidate()

    def _take(self, n: int, wait_s: float = 0.0) -> list[Request]:
        """Up to n queued requests, waiting at most wait_s for more to arrive; notes a close request."""
        taken: list[Request] = []
        deadline = time.monotonic() + wait_s
        while len(taken) < n and not self._stopping:
            try:
                item = self._queue.get(timeout=max(0.0, deadline - time.monotonic())) if wait_s else \
                    self._queue.get_nowait()
            except queue.Empty:
                break
            if item is None:
                self._stopping = True
                break
            taken.append(item)
        return taken

    def _poll(self, free: int) -> list[Request]:
        """Requests that join the running batch; none while train/save/load waits for the weights."""
        if self._exclusive_waiting or self._stopping or self._isolating or self._queue.empty():
            return []
        joined = [_shadow(r) for r in self._take(free) if r.future.set_running_or_notify_cancel()]
        self._joined.extend(joined)
        return joined

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        """Hold the weights: the running batch stops taking new requests, finishes, then we go."""
        with self._count_lock:
            self._exclusive_waiting += 1
        try:
            self._lock.acquire()
        finally:
            with self._count_lock:
                self._exclusive_waiting -= 1
        try:
            yield
        finally:
            self._lock.release()

    # ---- training ---------------------------------------------------------------------------

    def _make_optimizer(self) -> Any:
        torch = require("torch", "training")
        params = [p for p in self.model.parameters() if p.requires_grad]
        cfg = self.train_config
        return torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)

    def _make_ref_model(self) -> Any:
        """A frozen reference only when KL is on; with LoRA the base model (adapter off) is the reference."""
        if self.train_config.kl_coef <= 0 or self.lora:
            return None
        ref = load_causal_lm(self.path, self.device, self.dtype)
        ref.eval().requires_grad_(False)
        return ref

    def _require_trainable(self) -> None:
        if not self.trainable:
            raise EngineError("This engine was loaded with trainable=False (a frozen model); it cannot train.")

    def train(self, samples: list[Sample]) -> dict[str, float]:
        """One GRPO optimiser step (see vibe_rl.rl.grpo); version += 1 unless the step was skipped."""
        from vibe_rl.rl.grpo import grpo_step

        self._require_trainable()
        with self._exclusive(), self._threads():
            metrics, applied = grpo_step(
                self.model, self.optimizer, samples, self.train_config, pad_id=self.pad_id, device=self.device,
                max_len=self.max_model_len, ref_model=self.ref_model, version=self.version,
                step=self.step)
            self._weights_changed()
            return self.finish_step(metrics, skipped=not applied)

    def sft(self, conversations: list[list[dict]]) -> dict[str, float]:
        """One supervised step on chat conversations (loss on assistant tokens), for warm starts."""
        from vibe_rl.rl.sft import sft_step

        self._require_trainable()
        with self._exclusive(), self._threads():
            metrics, applied = sft_step(
                self.model, self.optimizer, self.tokenizer, conversations, self.train_config, pad_id=self.pad_id,
                device=self.device, max_len=self.max_model_len)
            self._weights_changed()
            return self.finish_step(metrics, skipped=not applied)

    @contextlib.contextmanager
    def _threads(self) -> Iterator[None]:
        """Use `cpu_threads` torch threads in the calling thread for the duration (then restore)."""
        torch = require("torch")
        before = torch.get_num_threads()
        if self.cpu_threads:
            torch.set_num_threads(self.cpu_threads)
        try:
            yield
        finally:
            torch.set_num_threads(before)

    def finish_step(self, metrics: dict[str, float], skipped: bool) -> dict[str, float]:
        """Bookkeeping shared by GRPO and SFT steps."""
        if skipped:
            self.nan_skipped_total += 1
        else:
            self.step += 1
            self.version += 1
        metrics.update(step=float(self.step), version=float(self.version),
                       nan_skipped=float(skipped), nan_skipped_total=float(self.nan_skipped_total))
        return metrics

    # ---- checkpoints ------------------------------------------------------------------------

    def save(self, directory: str | Path) -> Path:
        from vibe_rl.engine.checkpoint import save_checkpoint

        with self._exclusive():
            return save_checkpoint(self, Path(directory))

    def load(self, directory: str | Path) -> None:
        from vibe_rl.engine.checkpoint import load_checkpoint

        with self._exclusive():
            load_checkpoint(self, Path(directory))
            self._weights_changed()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._queue.put(None)
            self._worker.join(timeout=60)
            while not self._queue.empty():  # a request that slipped in while closing: fail it, never hang
                item = self._queue.get_nowait()
                if item is not None and item.future.set_running_or_notify_cancel():
                    item.future.set_exception(EngineError("The engine was closed before this request ran."))

    def __enter__(self) -> TorchEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _shadow(caller: Request) -> Request:
    """A copy of `caller` with a private future: a result is passed on to the caller's future at once, an
    error is kept (the batch's requests are then retried alone). `emitted` says whether tokens were streamed."""
    copy = dataclasses.replace(caller, future=Future())
    copy.origin, copy.emitted = caller, False  # type: ignore[attr-defined]
    if caller.on_token is not None:
        def on_token(token: int, logprob: float) -> None:
            copy.emitted = True  # type: ignore[attr-defined]
            caller.on_token(token, logprob)
        copy.on_token = on_token
    def settle(f: Future) -> None:
        if caller.future.done():
            return
        if f.exception() is None:
            caller.future.set_result(f.result())
        elif isinstance(f.exception(), RequestRejectedError):  # about this request alone: no retry helps
            caller.future.set_exception(f.exception())

    copy.future.add_done_callback(settle)
    return copy


def _cpu_threads(config: EngineConfig, device: str, model: Any) -> int:
    if device != "cpu":
        return 0
    if config.cpu_threads:
        return config.cpu_threads
    return 1 if sum(p.numel() for p in model.parameters()) < 50_000_000 else 0


def _eos_ids(tokenizer: Any, model: Any) -> set[int]:
    ids: set[int] = set()
    for value in (tokenizer.eos_token_id, getattr(getattr(model, "generation_config", None), "eos_token_id", None)):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    if isinstance(im_end, int) and im_end != tokenizer.unk_token_id and im_end is not None:
        ids.add(im_end)
    if not ids:
        raise EngineError("The tokenizer defines no EOS token; set eos_token in tokenizer_config.json.")
    return ids


def _wrap_lora(model: Any, config: EngineConfig) -> Any:
    peft = require("peft", "LoRA training")
    lc = config.lora
    spec = peft.LoraConfig(r=lc.rank, lora_alpha=lc.alpha, lora_dropout=lc.dropout,
                           target_modules=lc.target_modules, task_type="CAUSAL_LM")
    return peft.get_peft_model(model, spec)
