"""Supervised warm start on chat examples (e.g. a generated project's mock data).

Each example is a list of chat messages, or {"messages": [...], "tools": [...]}.
It is rendered with the model's own chat template; the loss is the mean
negative log-likelihood of the tokens the assistant wrote (its content, tool
calls and closing <|im_end|>), never of system/user/tool text. One call is one
optimiser step with micro-batches, gradient-norm clipping and the same
non-finite-loss guard as GRPO.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from vibe_rl.errors import ConfigError
from vibe_rl.extras import require
from vibe_rl.rl.batch import collate, micro_batches, prepare, score
from vibe_rl.rl.samples import Sample
from vibe_rl.rl.tool_format import inline_tools, template_support

if TYPE_CHECKING:
    from vibe_rl.schema import TrainConfig


def _split(example: Any) -> tuple[list[dict], list[dict] | None]:
    if isinstance(example, dict):
        return list(example.get("messages") or []), example.get("tools")
    return list(example), None


def chat_sample(tokenizer: Any, example: Any) -> Sample:
    """Render one conversation; loss mask 1 exactly on assistant-written tokens. Tools, tool calls and tool
    messages the template cannot render are written into the messages first (`vibe_rl.rl.tool_format`), exactly
    as the swarm server prompts the model later."""
    messages, tools = _split(example)
    if not any(m.get("role") == "assistant" for m in messages):
        raise ConfigError("An SFT example has no assistant message; there is nothing to learn from it.")
    support = template_support(tokenizer)
    if not support.complete:
        messages, tools = inline_tools(messages, tools, support)
    text = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)
    spans = []  # character spans the assistant wrote
    for k, m in enumerate(messages):
        if m.get("role") != "assistant" or k == 0:  # an opening assistant message has no prompt: skipped
            continue
        before = tokenizer.apply_chat_template(messages[:k], tools=tools, tokenize=False, add_generation_prompt=True)
        upto = tokenizer.apply_chat_template(messages[:k + 1], tools=tools, tokenize=False)
        if not (text.startswith(upto) and upto.startswith(before)):
            raise ConfigError("The chat template does not render conversations prefix by prefix; "
                              "SFT needs a template where earlier messages render the same way.")
        end = upto.rstrip("\n")  # the newline after <|im_end|> belongs to the template, not the model
        spans.append((len(before), len(end)))
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = enc["input_ids"], enc["offset_mapping"]
    mask = [int(any(a <= s and e <= b and e > s for a, b in spans)) for s, e in offsets]
    return Sample(input_ids=list(ids), loss_mask=mask, old_logprobs=[0.0] * len(ids))


def sft_step(model: Any, optimizer: Any, tokenizer: Any, examples: list[Any], cfg: TrainConfig, *, pad_id: int,
             device: Any, max_len: int) -> tuple[dict[str, float], bool]:
    """One supervised optimiser step -> (metrics, applied); applied is False when a value was not finite."""
    torch = require("torch", "SFT training")
    started = time.monotonic()
    opt = optimizer
    prep = prepare([chat_sample(tokenizer, ex) for ex in examples], max_len)
    total_tokens = sum(s.num_loss_tokens for s in prep.samples)

    model.train()
    opt.zero_grad(set_to_none=True)
    nll_sum, finite = 0.0, True
    try:
        for chunk in micro_batches(prep.samples, cfg.micro_batch_size, cfg.micro_batch_tokens):
            logp, _ = score(model, collate(chunk, pad_id, device), temperature_aware=False)  # (N,)
            loss = -logp.sum() / max(total_tokens, 1)  # token mean over the whole batch
            if not torch.isfinite(loss):
                finite = False
                break
            loss.backward()
            nll_sum += float(-logp.detach().sum())
        params = [p for p in model.parameters() if p.requires_grad]
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)) if finite else float("nan")
        finite = finite and math.isfinite(grad_norm)
        if finite:
            opt.step()
        opt.zero_grad(set_to_none=True)
    finally:
        model.eval()
    metrics = {
        "sft_loss": nll_sum / max(total_tokens, 1) if finite else float("nan"),
        "grad_norm": grad_norm,
        "num_samples": float(len(prep.samples)),
        "num_loss_tokens": float(total_tokens),
        "truncated_samples": float(prep.truncated_samples),
        "truncated_loss_tokens": float(prep.truncated_loss_tokens),
        "time_s": time.monotonic() - started,
    }
    return metrics, finite
