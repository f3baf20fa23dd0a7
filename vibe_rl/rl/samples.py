"""From recorded LLM calls (turns) to training samples.

The merge rule: walk an episode's turns in order; a turn whose prompt ids start
with the previous turn's prompt + response ids, token for token, continues the
same sequence (the new prompt tokens join it with loss mask 0, the response
with mask 1). Any other turn starts a new sample.

Re-tokenised turns: a turn whose messages continue an earlier turn's conversation (that turn's messages,
then an assistant reply) should start with that turn's prompt + response ids. When the chat template
renders the earlier answer differently from what the model sampled (whitespace, special tokens, stripped
thinking, a rewritten tool call), it does not; `retokenized_turns` counts such turns. They are never
"repaired" by re-tokenising: each turn still trains on its own recorded ids, as a new sample. Turns sampled with different
temperature/top_p also start a new sample, since one sample is re-scored under
one sampling distribution.

Alignment: `input_ids[k]`, `loss_mask[k]` and `old_logprobs[k]` all describe the
same token; `old_logprobs[k]` is log p(input_ids[k] | input_ids[:k]) under the
rollout policy where `loss_mask[k] == 1`, and 0.0 elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from vibe_rl.errors import ConfigError


@dataclass
class Turn:
    """One recorded LLM call: the exact token ids the engine saw and sampled.

    The one record type from the swarm server to the trainer: the server stores it (with the
    readable `messages`/`response_text`, the `model` it reached and whether that was a `static`
    opponent) and the trainer builds samples from the same objects. A static call has no ids
    (it is context, never trained).
    """

    prompt_ids: list[int]
    response_ids: list[int]
    response_logprobs: list[float]
    messages: list[dict[str, Any]] = field(default_factory=list)
    response_text: str = ""
    player: str | None = None
    model: str = ""
    static: bool = False
    context_only: bool = False  # a trainable-model call the client marked as context: recorded, never trained
    weight_version: int = 0
    temperature: float = 1.0
    top_p: float = 1.0
    ts: float = 0.0

    def __post_init__(self) -> None:
        if len(self.response_ids) != len(self.response_logprobs):
            raise ConfigError(
                f"Turn has {len(self.response_ids)} response ids but {len(self.response_logprobs)} logprobs; "
                "record one logprob per sampled token (the engine's Generation.logprobs)."
            )
        if not self.prompt_ids and not self.static:
            raise ConfigError("Turn has an empty prompt; every LLM call has at least one prompt token.")

    @property
    def trainable(self) -> bool:
        """A call of the trainable model that produced tokens and was not marked context only.

        A context-only turn is left out of the samples; when a later turn extends it, its tokens join that
        sample as prompt (loss mask 0), as any text between two trained answers does."""
        return not self.static and not self.context_only and bool(self.prompt_ids) and bool(self.response_ids)


@dataclass
class Sample:
    """One training sequence; the trainer puts loss on tokens where loss_mask is 1."""

    input_ids: list[int]
    loss_mask: list[int]
    old_logprobs: list[float]
    advantage: float = 0.0
    task_id: str = ""
    episode_id: str = ""
    temperature: float = 1.0
    top_p: float = 1.0
    weight_version: int = 0  # the oldest weight version among its turns
    num_turns: int = 1
    players: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        n = len(self.input_ids)
        if len(self.loss_mask) != n or len(self.old_logprobs) != n:
            raise ConfigError(
                f"Sample lengths differ: {n} input_ids, {len(self.loss_mask)} loss_mask, "
                f"{len(self.old_logprobs)} old_logprobs; all three are aligned per token."
            )

    @property
    def num_loss_tokens(self) -> int:
        return sum(self.loss_mask)


def _start(turn: Turn, task_id: str, episode_id: str, advantage: float) -> Sample:
    return Sample(
        input_ids=list(turn.prompt_ids) + list(turn.response_ids),
        loss_mask=[0] * len(turn.prompt_ids) + [1] * len(turn.response_ids),
        old_logprobs=[0.0] * len(turn.prompt_ids) + [float(x) for x in turn.response_logprobs],
        advantage=advantage, task_id=task_id, episode_id=episode_id,
        temperature=turn.temperature, top_p=turn.top_p, weight_version=turn.weight_version,
        players=[turn.player] if turn.player else [],
    )


def _extends(sample: Sample, turn: Turn) -> bool:
    n = len(sample.input_ids)
    return (
        len(turn.prompt_ids) >= n
        and turn.prompt_ids[:n] == sample.input_ids
        and (turn.temperature, turn.top_p) == (sample.temperature, sample.top_p)
    )


def retokenized_turns(turns: list[Turn]) -> int:
    """Turns that continue an earlier turn's conversation by messages but not by token ids (see the module doc)."""
    count = 0
    for j, turn in enumerate(turns):
        continued = extended = False
        for earlier in turns[:j]:
            k = len(earlier.messages)
            if (0 < k < len(turn.messages) and turn.messages[k].get("role") == "assistant"
                    and turn.messages[:k] == earlier.messages):
                continued = True
                done = list(earlier.prompt_ids) + list(earlier.response_ids)
                if turn.prompt_ids[:len(done)] == done:
                    extended = True
                    break
        count += continued and not extended
    return count


def build_samples(turns: Iterable[Turn], task_id: str = "", episode_id: str = "",
                  advantage: float = 0.0) -> list[Sample]:
    """Turns of one episode (in call order) -> samples, merging turns that extend the previous one."""
    samples: list[Sample] = []
    for turn in turns:
        last = samples[-1] if samples else None
        if last is None or not _extends(last, turn):
            samples.append(_start(turn, task_id, episode_id, advantage))
            continue
        new_prompt = turn.prompt_ids[len(last.input_ids):]  # tool results, the next user message, ...
        last.input_ids += list(new_prompt) + list(turn.response_ids)
        last.loss_mask += [0] * len(new_prompt) + [1] * len(turn.response_ids)
        last.old_logprobs += [0.0] * len(new_prompt) + [float(x) for x in turn.response_logprobs]
        last.weight_version = min(last.weight_version, turn.weight_version)
        last.num_turns += 1
        if turn.player and turn.player not in last.players:
            last.players.append(turn.player)
    return samples
