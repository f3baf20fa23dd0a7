"""The sampled tokens of a recorded call, as the trace viewer shows them: each token's text (decoded with the run's
tokenizer when it can be loaded), its logprob, and whether the loss covers it.

The loss mask the trainer builds (`vibe_rl.rl.samples.build_samples`) puts loss on the response tokens of a
trainable model's call (mask 1) and on nothing else: prompt tokens, tool results and every static model's answer
are context (mask 0). Episodes that no update uses (`eval`, `skipped`, `stale`, `failed`) train nothing.

The tokenizer is the trainable model's (`model.path` of the job the server recorded); a static model that is a
frozen copy of it shares it. When it cannot be loaded (transformers missing, the path gone), a token shows as
its id. Loaded once per process; nothing is downloaded.
"""

from __future__ import annotations

import functools
import math
from typing import Any

MAX_TOKENS = 4000  # tokens shown per call; the rest are counted, not drawn
UNTRAINED_STATUSES = ("eval", "skipped", "stale", "failed")


@functools.lru_cache(maxsize=4)
def _tokenizer(model_path: str) -> Any:
    try:
        from vibe_rl.engine.loader import resolve_model_path

        directory = resolve_model_path(model_path)
        import transformers

        return transformers.AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
    except Exception:  # noqa: BLE001 (any failure: the viewer shows token ids instead)
        return None


def pieces(model_path: str | None, ids: list[int]) -> list[str] | None:
    """The text of each token id (byte-level pieces decoded one by one), or None without a tokenizer."""
    tokenizer = _tokenizer(model_path) if model_path else None
    if tokenizer is None:
        return None
    try:
        return [tokenizer.decode([i], skip_special_tokens=False) for i in ids]
    except Exception:  # noqa: BLE001 (an id outside the vocabulary: show ids)
        return None


def colour(logprob: float) -> str:
    """A background for a token's logprob: green near p = 1, through yellow, to red at p <= 0.01."""
    p = math.exp(max(min(logprob, 0.0), -50.0))
    confident = max(0.0, min(1.0, 1.0 + math.log10(max(p, 1e-2)) / 2))  # p=1 -> 1, p=0.1 -> .5, p<=0.01 -> 0
    return f"hsl({round(120 * confident)},75%,80%)"


def tokens(turn: dict[str, Any], status: str, model_path: str | None) -> dict[str, Any]:
    """What the viewer draws for one call: [(text, logprob, trained)], how many tokens were cut, the mask's reason."""
    ids = list(turn.get("response_ids") or [])
    logprobs = list(turn.get("logprobs") or [])
    trained = not turn["static"] and not turn.get("context_only") and status not in UNTRAINED_STATUSES
    why = ("trained: loss on these tokens" if trained else
           "context: a static model's answer, never trained" if turn["static"] else
           "context: the client sent this call with context_only, never trained" if turn.get("context_only") else
           f"context: the episode is '{status}', no update trains it")
    shown = ids[:MAX_TOKENS]
    text = pieces(model_path, shown) if shown else []
    out = [((text[k] if text is not None else f"#{i}"), logprobs[k] if k < len(logprobs) else None, trained)
           for k, i in enumerate(shown)]
    return {"tokens": out, "cut": len(ids) - len(shown), "trained": trained, "why": why, "decoded": text is not None}
