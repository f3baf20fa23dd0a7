"""GRPO training sharded over every rank of the group with PyTorch FSDP2 (`fully_shard`).

Each decoder layer and then the whole model are wrapped with `fully_shard` on a 1-D device mesh
over all ranks: every rank keeps 1/world of each parameter, its gradient and its AdamW state.
Parameters stay in the dtype they were loaded in (bf16 on GPU, fp32 on CPU); gradients are
reduced in fp32 (`MixedPrecisionPolicy(reduce_dtype=float32)`). With LoRA the frozen base is
sharded too and only the adapter has gradients and optimizer state.

One step (`ShardedTrainer.step`, called on every rank with the same samples):
1. `sharding.split_batch` gives each rank its samples (same count of model passes everywhere);
2. `grpo_step` runs on the rank's samples, its logits' gradient scaled by world * T_r / T so the
   FSDP average equals the single-process gradient (see `vibe_rl.engine.sharding`); before each
   micro-batch's backward its hook (`on_micro_batch`) makes every rank agree on whether the
   micro-batch is finite (logits and loss: one 1-element all-reduce) and turns gradient sync on
   only for the last micro-batch (see "Gradient sync" below);
3. the per-rank metrics are merged into the single-process metrics;
4. the generation replica of this rank (a plain copy of the model) gets the new weights, one
   FSDP unit at a time (`unshard()`: one all-gather per decoder layer; LoRA: per adapter tensor),
   copied in place: the replica's tensors keep their addresses, so CUDA graphs captured by a
   generator stay valid.

Gradient sync (`grad_sync`, env VIBE_RL_GRAD_SYNC): "step" reduce-scatters gradients once per
step: FSDP2 accumulates the earlier micro-batches' gradients unsharded, in fp32 (4 bytes per
trainable parameter on every rank, the full model's size), and the last backward reduces them.
"micro_batch" reduce-scatters after every backward (no accumulator: the least memory, the most
traffic). "auto" (default) picks "step" when every rank has room for the accumulator plus
`HEADROOM` of its memory, else "micro_batch" (decided each step, the same on every rank).
`reshard_after_forward` (env VIBE_RL_RESHARD_AFTER_FORWARD=0 turns it off) frees each decoder
layer's gathered weights after its forward and gathers them again in backward; off, the
gathered weights stay until backward (one all-gather less per micro-batch, up to the full
model's weights in memory on every rank during a micro-batch).
"""

from __future__ import annotations

import math
import os
from typing import Any

from vibe_rl.engine.distributed import DistEnv
from vibe_rl.engine.loader import enable_checkpointing
from vibe_rl.engine.sharding import merge_metrics, split_batch
from vibe_rl.errors import ConfigError
from vibe_rl.extras import require

GRAD_SYNC_MODES = ("auto", "step", "micro_batch")
HEADROOM = 0.15  # share of a GPU's memory kept free for activations when "auto" picks once-per-step sync


def decoder_layers(model: Any) -> list[Any]:
    """The transformer blocks to shard one by one (HF's `_no_split_modules` names their class)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    names = set(getattr(base, "_no_split_modules", None) or [])
    layers = [m for m in model.modules() if type(m).__name__ in names]
    if not layers:
        layers = [m for name, mod in model.named_modules() if name.endswith("layers") for m in mod.children()]
    return layers


def _grad_scale_fn() -> Any:
    torch = require("torch")

    class GradScale(torch.autograd.Function):
        """Identity forward; multiplies the incoming gradient by `scale` on the way back."""

        @staticmethod
        def forward(ctx, x, scale):  # type: ignore[override]
            ctx.scale = scale
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad):  # type: ignore[override]
            return grad * ctx.scale, None

    return GradScale


def run_grpo(trainer: Any, samples: list[Any], passes: int) -> tuple[dict[str, float], bool]:
    """`vibe_rl.rl.grpo.grpo_step` on this rank's samples, in `passes` micro-batches -> (metrics, applied)."""
    from vibe_rl.rl.grpo import grpo_step

    return grpo_step(trainer.model, trainer.optimizer, samples, trainer.train_config, pad_id=trainer.pad_id,
                     device=trainer.env.device, max_len=trainer.max_model_len, ref_model=trainer.ref_model,
                     version=trainer.version, step=trainer.step_count, on_micro_batch=trainer.on_micro_batch,
                     passes=passes)


def _fsdp_modules(model: Any) -> list[Any]:
    from torch.distributed.fsdp import FSDPModule

    return [m for m in model.modules() if isinstance(m, FSDPModule)]


def drop_unsynced_grads(model: Any) -> None:
    """Forget gradients FSDP2 accumulated unsharded without a reduce (a step skipped midway under
    once-per-step sync): they would otherwise join the next step's gradient."""
    for module in _fsdp_modules(model):
        group = module._get_fsdp_state()._fsdp_param_group
        for fsdp_param in group.fsdp_params if group is not None else []:
            fsdp_param.unsharded_accumulated_grad = None
            unsharded = getattr(fsdp_param, "_unsharded_param", None)
            if unsharded is not None:
                unsharded.grad = None


def _env_settings(grad_sync: str | None, reshard_after_forward: bool | None) -> tuple[str, bool]:
    grad_sync = grad_sync or os.environ.get("VIBE_RL_GRAD_SYNC", "auto")
    if grad_sync not in GRAD_SYNC_MODES:
        raise ConfigError(f"grad_sync (VIBE_RL_GRAD_SYNC) is {grad_sync!r}; use one of {', '.join(GRAD_SYNC_MODES)}.")
    if reshard_after_forward is None:
        reshard_after_forward = os.environ.get("VIBE_RL_RESHARD_AFTER_FORWARD", "1").strip() not in ("0", "false")
    return grad_sync, reshard_after_forward


class ShardedTrainer:
    """FSDP2-sharded model + AdamW on every rank; `step` is collective (all ranks call it together)."""

    def __init__(self, model: Any, train_config: Any, env: DistEnv, *, pad_id: int, max_model_len: int,
                 lora: bool = False, ref_model: Any = None, grad_sync: str | None = None,
                 reshard_after_forward: bool | None = None):
        torch = require("torch", "multi-GPU training")
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        self.env, self.train_config, self.lora = env, train_config, lora
        self.pad_id, self.max_model_len = pad_id, max_model_len
        self.version = self.step_count = self.nan_skipped_total = 0
        self.grad_sync, self.reshard_after_forward = _env_settings(grad_sync, reshard_after_forward)
        self.last_grad_syncs = 0  # backward passes of the last step that reduced gradients
        self.last_sync_mode = ""  # what the last step did: "step" or "micro_batch"
        self.last_passes = 0  # micro-batches (forward/backward passes) every rank ran in the last step
        if getattr(train_config, "gradient_checkpointing", False):
            enable_checkpointing(model)
            model.config.use_cache = False
        mesh = init_device_mesh(env.device_type, (env.world_size,))
        policy = MixedPrecisionPolicy(reduce_dtype=torch.float32)
        for layer in decoder_layers(model):
            fully_shard(layer, mesh=mesh, mp_policy=policy, reshard_after_forward=self.reshard_after_forward)
        fully_shard(model, mesh=mesh, mp_policy=policy)
        self.model = model
        self.ref_model = None
        if ref_model is not None:  # a frozen full copy for the KL term, sharded the same way
            ref_model.requires_grad_(False).eval()
            for layer in decoder_layers(ref_model):
                fully_shard(layer, mesh=mesh, mp_policy=policy)
            self.ref_model = fully_shard(ref_model, mesh=mesh, mp_policy=policy)
        self.model.eval()
        self.trainable = [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW([p for _, p in self.trainable], lr=train_config.lr,
                                           weight_decay=train_config.weight_decay)
        self.grad_scale = 1.0
        self._scale_fn = _grad_scale_fn()
        self._logits_bad: Any = None
        self._sync_each = True
        self.accumulator_bytes = 4 * sum(p.numel() for _, p in self.trainable)  # fp32, unsharded
        self.in_step = False
        self.model.register_forward_hook(self._on_logits)

    def _on_logits(self, module: Any, args: Any, output: Any) -> Any:
        """During a step: note whether the logits are finite (agreed on in `on_micro_batch`), then
        scale this rank's share of the gradient (see vibe_rl.engine.sharding)."""
        torch = require("torch")
        logits = getattr(output, "logits", None)
        if not self.in_step or logits is None or not torch.is_grad_enabled():
            return output
        self._logits_bad = (~torch.isfinite(logits.detach())).any()
        if self.grad_scale != 1.0:
            output.logits = self._scale_fn.apply(logits, self.grad_scale)
        return output

    def on_micro_batch(self, index: int, is_last: bool, loss: Any) -> Any:
        """`grpo_step`'s hook before each backward: every rank learns whether any rank's micro-batch is
        not finite (a non-finite loss on every rank then: all skip the step at the same micro-batch, none
        waits in a collective the others left), and gradients are reduced only when this step needs it."""
        torch = require("torch")
        dist = require("torch.distributed")
        bad = ~torch.isfinite(loss.detach())
        if self._logits_bad is not None:
            bad = bad | self._logits_bad
        self._logits_bad = None
        if self.env.world_size > 1:
            flag = bad.to(torch.float32).reshape(1)
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            bad = flag[0] > 0
        sync = is_last or self._sync_each
        self.model.set_requires_gradient_sync(sync)
        if sync and not bool(bad):  # (grpo_step reads the loss right after: this sync costs nothing more)
            self.last_grad_syncs += 1
        return loss.masked_fill(bad, float("inf"))

    def _reduce_every_micro_batch(self) -> bool:
        """This step's sync mode; "auto" asks every rank whether the fp32 accumulator fits (collective)."""
        if self.grad_sync != "auto":
            return self.grad_sync == "micro_batch"
        torch = require("torch")
        dist = require("torch.distributed")
        fits = 1.0
        if self.env.device_type == "cuda":
            device = torch.device(self.env.device)
            free, total = torch.cuda.mem_get_info(device)
            free += torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
            fits = float(free >= self.accumulator_bytes + HEADROOM * total)
        flag = torch.tensor([fits], device=self.env.device)
        if self.env.world_size > 1:
            dist.all_reduce(flag, op=dist.ReduceOp.MIN)
        return bool(flag[0] < 1)

    # ---- one step ---------------------------------------------------------------------------

    def step(self, samples: list[Any], replica: Any = None) -> dict[str, float]:
        """One GRPO update on the whole batch (every rank passes the same list); then re-sync `replica`."""
        cfg = self.train_config
        kl_on = cfg.kl_coef > 0
        split = split_batch(samples, self.env.world_size, self.max_model_len, cfg.max_samples, kl_on, self.pad_id,
                            cfg.micro_batch_size, cfg.micro_batch_tokens)
        mine = split.shards[self.env.rank]
        self.last_passes = split.passes
        local_tokens = sum(s.num_loss_tokens for s in mine)
        self.grad_scale = self.env.world_size * local_tokens / max(split.total_tokens, 1)
        self._sync_each = self._reduce_every_micro_batch()
        self.last_sync_mode = "micro_batch" if self._sync_each else "step"
        self.last_grad_syncs, self._logits_bad = 0, None
        self.in_step = True
        try:
            local, applied = run_grpo(self, mine, split.passes)
            if not applied:
                drop_unsynced_grads(self.model)
        finally:
            self.in_step, self.grad_scale = False, 1.0
            self.model.set_requires_gradient_sync(True)
            if replica is not None:
                self.sync_replica(replica)
        merged = merge_metrics(self.env.all_gather(local), split, kl_on, self.version)
        skipped = not (math.isfinite(merged["loss"]) and math.isfinite(merged.get("grad_norm", 0.0)))
        if skipped:
            self.nan_skipped_total += 1
        else:
            self.step_count += 1
            self.version += 1
        merged.update(step=float(self.step_count), version=float(self.version), nan_skipped=float(skipped),
                      nan_skipped_total=float(self.nan_skipped_total))
        return merged

    # ---- generation replicas ----------------------------------------------------------------

    def _synced_names(self) -> list[str]:
        """Parameters a replica must receive: the trainable ones (all of them in a full fine-tune)."""
        return [n for n, _ in self.trainable]

    def sync_replica(self, replica: Any | None) -> None:
        """Copy the current weights into `replica` (collective: every rank calls it, replica or not).

        Full fine-tune: one FSDP unit at a time (each decoder layer, then the root's own parameters)
        is all-gathered by FSDP's `unshard()`, one collective per unit, and its parameters, plain
        tensors until `reshard()`, are copied in place. LoRA: the adapters, one `full_tensor()` each.
        """
        torch = require("torch")
        from torch.distributed.fsdp import FSDPModule
        from torch.distributed.tensor import DTensor

        params = dict(replica.named_parameters()) if replica is not None else {}
        with torch.no_grad():
            if self.lora:
                for name, p in self.trainable:
                    full = p.full_tensor() if isinstance(p, DTensor) else p.detach()
                    if name in params:
                        params[name].copy_(full.view_as(params[name]))
                return
            for prefix, unit in self.model.named_modules():
                if not isinstance(unit, FSDPModule):
                    continue
                unit.unshard()
                for name, p in unit.named_parameters(prefix=prefix):
                    if not isinstance(p, DTensor) and name in params:  # a DTensor: another unit's, still sharded
                        params[name].copy_(p.view_as(params[name]))
                unit.reshard()

    # ---- checkpoints --------------------------------------------------------------------------

    def full_optimizer_state(self) -> dict[str, Any]:
        """The optimizer state keyed by parameter name, gathered on rank 0's CPU (collective)."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

        return get_optimizer_state_dict(self.model, self.optimizer,
                                        options=StateDictOptions(full_state_dict=True, cpu_offload=True))

    def full_model_state(self) -> dict[str, Any]:
        """The trained weights (LoRA: the adapter only) as full tensors on rank 0's CPU (collective)."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        return get_model_state_dict(self.model, options=StateDictOptions(
            full_state_dict=True, cpu_offload=True, ignore_frozen_params=self.lora))

    def load_full(self, weights: dict[str, Any] | None, optimizer_state: dict[str, Any] | None,
                  has_optimizer: bool) -> None:
        """Shard full state dicts that rank 0 holds (others pass None) onto every rank (collective)."""
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            set_model_state_dict,
            set_optimizer_state_dict,
        )

        options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True, strict=False)
        set_model_state_dict(self.model, weights or {}, options=options)
        if has_optimizer:
            set_optimizer_state_dict(self.model, self.optimizer, optimizer_state or {}, options=options)
