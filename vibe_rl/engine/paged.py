"""Continuous batching on a paged KV cache with prefix reuse: the GPU generation path.

Built for agent episodes: many short sequential calls whose prompt extends the
previous call of the same player (and GRPO groups whose episodes share a task
prompt). One loop iteration:

1. Admit waiting requests while row slots and KV blocks last. Each shares the
   longest cached prefix of its prompt (`kv_blocks.BlockManager.match`) and takes
   private blocks for the rest of its prompt plus its whole token budget, so a
   running sequence never waits for memory (nothing is preempted). A request whose
   prompt shares whole blocks with a sequence still being prefilled, beyond what that
   sequence has cached so far, stays waiting (the requests behind it are admitted)
   until those blocks are computed, then shares them: calls sent at once with a common
   prefix (a game's players voting on one record, a group's episodes on one task)
   compute it once.
2. Prefill at most `prefill_chunk` new prompt tokens, oldest request first (a long
   prompt is split over several iterations, so decoding never stalls behind it).
   A sequence whose prompt is complete samples its first token from those logits.
3. Launch one decode step for every sequence that has a token to feed (a CUDA graph
   on GPU), then read the tokens of the step launched in the previous iteration: the
   host's bookkeeping runs while the GPU computes. A sequence still waiting for its
   last token is fed it on the device (`PagedModel.decode(src=...)`); if that token
   ends the sequence (eos, a stop string), the extra step's token is dropped. Its K/V
   write lands in the sequence's own blocks, at the position that token would take.
   A sequence whose budget ends with the step in flight is not fed again.
4. Finished rows resolve their futures at once and release their blocks; full
   blocks of prompt and answer stay cached for the next call of the same player.

Sampling is the simple loop's (`generate.py`): per-row temperature, top-p, seed,
stop strings and max_tokens, and the logprob of each sampled token under the
distribution it was drawn from. The cache is dropped (`invalidate`) whenever the
weights change; the caller keeps generation and training from overlapping.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vibe_rl.engine.generate import Request, _generation, _hits_stop, _Row, _top_logprobs
from vibe_rl.engine.kv_blocks import BlockManager
from vibe_rl.engine.paged_model import PagedModel, kv_bytes_per_token
from vibe_rl.engine.sampler import sample, sampling_mode
from vibe_rl.errors import RequestRejectedError
from vibe_rl.extras import require

log = logging.getLogger(__name__)


@dataclass
class _Seq:
    row: _Row
    slot: int  # row slot: which block-table row this sequence uses
    table: list[int]  # block ids, prefix blocks first
    nodes: list[int]  # prefix-tree node of each registered full block
    computed: int  # tokens whose KV is in the cache
    done: bool = False
    tokens: list[int] = field(default_factory=list)  # prompt + sampled ids

    @property
    def prompt_len(self) -> int:
        return len(self.row.req.prompt_ids)

    @property
    def prefilling(self) -> bool:
        return self.computed < self.prompt_len


@dataclass
class _Launched:
    """A decode step in flight: its sequences, in batch order, and its `DecodeStep`."""

    seqs: list[_Seq]
    step: Any
    mode: str
    index: dict[int, int] = field(default_factory=dict)  # id(seq) -> its row in the step

    def __post_init__(self) -> None:
        self.index = {id(s): j for j, s in enumerate(self.seqs)}


class PagedGenerator:
    """Owns the paged KV cache; `run` decodes requests (and those `poll` hands over) until all finish."""

    def __init__(self, model: Any, tokenizer: Any, *, eos_ids: set[int], max_model_len: int, max_rows: int,
                 kv_cache_bytes: int, block_size: int = 16, prefill_chunk: int = 2048, cuda_graphs: bool = True,
                 fused_kernels: bool = True):
        self.tokenizer, self.eos_ids, self.max_model_len = tokenizer, eos_ids, max_model_len
        self.max_rows, self.prefill_chunk = max_rows, prefill_chunk
        num_blocks = max(2, kv_cache_bytes // (kv_bytes_per_token(model) * block_size))
        self.runner = PagedModel(model, num_blocks=num_blocks, block_size=block_size, max_model_len=max_model_len,
                                 max_rows=max_rows, cuda_graphs=cuda_graphs, fused_kernels=fused_kernels)
        self.blocks = BlockManager(num_blocks, block_size)
        torch = require("torch")
        # Generation runs on its own stream: the legacy default stream synchronises with every other
        # stream, which would break a CUDA-graph capture running in another engine of the same process.
        self._stream = torch.cuda.Stream(self.runner.device) if self.runner.device.type == "cuda" else None
        self.kv_cache_bytes = num_blocks * self.runner.bytes_per_block
        self._free_slots = list(range(max_rows - 1, -1, -1))

    def invalidate(self) -> None:
        """The weights changed: cached prefixes are stale and the fused q/k/v copies are refreshed."""
        self.blocks.invalidate()
        self.runner.refresh()

    # ---- the loop -------------------------------------------------------------------------

    def run(self, requests: list[Request], *, version: int, poll: Callable[[int], list[Request]] | None = None,
            stats: dict[str, int] | None = None) -> None:
        from vibe_rl.rl.batch import stable_attention

        torch = require("torch", "generating with the paged engine")
        stats = stats if stats is not None else {}
        stats["batches"] = stats.get("batches", 0) + 1
        waiting: deque[Request] = deque(requests)
        running: list[_Seq] = []
        flight: _Launched | None = None  # the decode step launched last, not read yet
        stream = contextlib.nullcontext()
        if self._stream is not None:
            self._stream.wait_stream(torch.cuda.default_stream(self.runner.device))  # after any queued update
            stream = torch.cuda.stream(self._stream)
        try:
            with torch.inference_mode(), stable_attention(), stream:
                while True:
                    free = self.max_rows - len(running) - len(waiting)
                    if poll is not None and free > 0:
                        joined = poll(free)
                        stats["joined_requests"] = stats.get("joined_requests", 0) + len(joined)
                        waiting.extend(joined)
                    self._admit(waiting, running, stats)
                    if not running and flight is None:
                        if waiting:  # nothing runs, yet the head does not fit: it never will
                            self._refuse(waiting.popleft())
                            continue
                        break
                    stats["largest_batch"] = max(stats.get("largest_batch", 0), len(running))
                    if any(s.prefilling for s in running):
                        self._prefill(running, version, stats)
                    if flight is not None and flight.mode == "dist":  # the next step overwrites its distributions
                        self._read(flight, version, stats)
                        flight = None
                    ready = [s for s in running if not s.done and not s.prefilling and self._may_feed(s, flight)]
                    launched = self._launch(ready, flight, stats) if ready else None
                    if flight is not None:
                        self._read(flight, version, stats)
                    flight = launched
                    for s in running:
                        if s.done:
                            self._release(s)
                    running = [s for s in running if not s.done]
        except BaseException as exc:
            for s in running:
                if not s.done:
                    self._release(s)
                if not s.row.req.future.done():
                    s.row.req.future.set_exception(exc)
            for req in waiting:
                if not req.future.done():
                    req.future.set_exception(exc)
            raise

    def _admit(self, waiting: deque[Request], running: list[_Seq], stats: dict[str, int]) -> None:
        deferred: list[Request] = []  # their shared prefix is being prefilled: they go back first, in order
        try:
            self._admit_some(waiting, running, stats, deferred)
        finally:
            waiting.extendleft(reversed(deferred))

    def _admit_some(self, waiting: deque[Request], running: list[_Seq], stats: dict[str, int],
                    deferred: list[Request]) -> None:
        while waiting and self._free_slots:
            req = waiting[0]
            if self._prefix_in_prefill(req.prompt_ids, running):
                deferred.append(waiting.popleft())
                continue
            budget = min(req.sampling.max_tokens, self.max_model_len - len(req.prompt_ids))
            window = max((len(s.encode()) for s in req.sampling.stop), default=0) + 4
            total = self.blocks.blocks_for(len(req.prompt_ids) + budget)
            if total > self.blocks.num_blocks - 1:
                waiting.popleft()
                self._refuse(req, total)
                continue
            match = self.blocks.match(req.prompt_ids)
            new = self.blocks.allocate(total - len(match.blocks))
            if new is None:  # wait for running sequences to free blocks
                self.blocks.release(match.blocks)
                return
            waiting.popleft()
            slot = self._free_slots.pop()
            table = match.blocks + new
            self.runner.set_table(slot, table)
            cached = match.tokens(self.blocks.block_size)
            running.append(_Seq(_Row(req, budget, window), slot, table, list(match.nodes), cached,
                                tokens=list(req.prompt_ids)))
            stats["prompt_tokens"] = stats.get("prompt_tokens", 0) + len(req.prompt_ids)
            stats["prefix_hit_tokens"] = stats.get("prefix_hit_tokens", 0) + cached

    def _prefix_in_prefill(self, prompt: list[int], running: list[_Seq]) -> bool:
        """Whether a sequence still prefilling will cache whole blocks of `prompt` it has not cached yet."""
        bs = self.blocks.block_size
        usable = (len(prompt) - 1) // bs * bs  # as BlockManager.match: one prompt token is always computed
        for s in running:
            need = (len(s.nodes) + 1) * bs  # one whole shared block more than it has cached
            if s.prefilling and need <= min(usable, s.prompt_len) and prompt[:need] == s.tokens[:need]:
                return True
        return False

    def _refuse(self, req: Request, blocks: int | None = None) -> None:
        need = f"{blocks} KV blocks" if blocks else "more KV blocks than are free"
        req.future.set_exception(RequestRejectedError(
            f"A request of {len(req.prompt_ids)} prompt tokens + {req.sampling.max_tokens} max_tokens needs {need}, "
            f"but the paged KV cache holds {self.blocks.num_blocks - 1} blocks of {self.blocks.block_size} tokens. "
            "Raise model.kv_cache_gb, or lower max_tokens / the prompt length."))

    def _release(self, seq: _Seq) -> None:
        self.blocks.release(seq.table)
        seq.table = []
        self._free_slots.append(seq.slot)

    # ---- steps ----------------------------------------------------------------------------

    def _prefill(self, running: list[_Seq], version: int, stats: dict[str, int]) -> None:
        budget, segments, chosen = self.prefill_chunk, [], []
        for s in running:
            if not s.prefilling or budget <= 0:
                continue
            take = min(s.prompt_len - s.computed, budget)
            segments.append((s.slot, s.computed, s.tokens[s.computed:s.computed + take]))
            chosen.append(s)
            budget -= take
        logits = self.runner.prefill(segments)  # (s, V)
        stats["prefill_tokens"] = stats.get("prefill_tokens", 0) + self.prefill_chunk - budget
        complete = []
        for j, (s, (_, start, tokens)) in enumerate(zip(chosen, segments, strict=True)):
            s.computed = start + len(tokens)
            self._register(s)
            if not s.prefilling:
                complete.append(j)
        if complete:
            finished = [chosen[j] for j in complete]
            self._sample(finished, logits[complete], version, stats)

    @staticmethod
    def _may_feed(s: _Seq, flight: _Launched | None) -> bool:
        """A sequence in the step in flight gets another step only if its budget has room after that one."""
        return flight is None or id(s) not in flight.index or len(s.row.ids) + 2 <= s.row.budget

    def _launch(self, ready: list[_Seq], flight: _Launched | None, stats: dict[str, int]) -> _Launched:
        """Launch one decode step; a sequence in the step in flight is fed that step's token on the device."""
        ids, pos, src, index = [], [], [], []
        for s in ready:
            j = flight.index.get(id(s), -1) if flight is not None else -1
            ahead = int(j >= 0)  # 1: its last token is still on the device
            ids.append(0 if ahead else s.tokens[-1])
            pos.append(len(s.tokens) - 1 + ahead)
            src.append(j)
            index.append(len(s.row.ids) + ahead)
        rows = [s.row for s in ready]
        mode = sampling_mode([r.req.sampling.top_p for r in rows], [r.req.sampling.top_logprobs for r in rows])
        step = self.runner.decode(
            ids, pos, [s.slot for s in ready],
            params=[[r.req.sampling.temperature for r in rows], [r.req.sampling.top_p for r in rows]],
            seeds=[[r.req.seed for r in rows], index], mode=mode, src=src)
        stats["decode_steps"] = stats.get("decode_steps", 0) + 1
        return _Launched(ready, step, mode)

    def _read(self, flight: _Launched, version: int, stats: dict[str, int]) -> None:
        """Wait for a launched step and record its tokens; rows of sequences that ended meanwhile are dropped."""
        tokens, logprobs = flight.step.result()
        live = [j for j, s in enumerate(flight.seqs) if not s.done]
        stats["wasted_decode_rows"] = stats.get("wasted_decode_rows", 0) + len(flight.seqs) - len(live)
        if not live:
            return
        seqs = [flight.seqs[j] for j in live]
        for s in seqs:
            s.computed += 1
            self._register(s)
        logp = flight.step.logp
        if logp is not None and len(live) < len(flight.seqs):
            logp = logp[live]
        self._record(seqs, [tokens[j] for j in live], [logprobs[j] for j in live], logp, version, stats)

    def _register(self, s: _Seq) -> None:
        """Key every newly completed full block, so later prompts with this prefix share it."""
        bs = self.blocks.block_size
        while len(s.nodes) < s.computed // bs:
            k = len(s.nodes)
            parent = s.nodes[-1] if s.nodes else 0
            s.nodes.append(self.blocks.register(s.table[k], parent, s.tokens[k * bs:(k + 1) * bs]))

    def _sample(self, seqs: list[_Seq], logits: Any, version: int, stats: dict[str, int]) -> None:
        """Sample the first token of sequences whose prompt was just prefilled (eager)."""
        torch = require("torch")
        rows = [s.row for s in seqs]
        params = torch.tensor([[r.req.sampling.temperature for r in rows], [r.req.sampling.top_p for r in rows]],
                              device=logits.device)
        seeds = torch.tensor([[r.req.seed for r in rows], [len(r.ids) for r in rows]], dtype=torch.long,
                             device=logits.device)
        mode = sampling_mode([r.req.sampling.top_p for r in rows], [r.req.sampling.top_logprobs for r in rows])
        picked, chosen, logp = sample(logits, params, seeds, mode, self.runner.kernels)
        self._record(seqs, picked.tolist(), chosen.tolist(), logp, version, stats)

    def _record(self, seqs: list[_Seq], tokens: list[int], token_logprobs: list[float], logp: Any, version: int,
                stats: dict[str, int]) -> None:
        rows = [s.row for s in seqs]
        tops = _top_logprobs(logp, rows)
        for s, token, lp, top in zip(seqs, tokens, token_logprobs, tops, strict=True):
            row = s.row
            row.push(token, lp, top)
            s.tokens.append(token)
            if token in self.eos_ids or (row.req.sampling.stop and _hits_stop(self.tokenizer, row)):
                row.finish = "stop"
            elif len(row.ids) >= row.budget:
                row.finish = "length"
            if row.finish:
                s.done = True
                stats["requests"] = stats.get("requests", 0) + 1
                stats["generated_tokens"] = stats.get("generated_tokens", 0) + len(row.ids)
                row.req.future.set_result(_generation(row, version))
