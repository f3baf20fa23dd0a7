"""SFT warm start: loss on assistant tokens only, and it goes down."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from vibe_rl.errors import ConfigError  # noqa: E402
from vibe_rl.rl.sft import chat_sample  # noqa: E402

CONVERSATION = [
    {"role": "system", "content": "You are player 1."},
    {"role": "user", "content": "Describe your word."},
    {"role": "assistant", "content": "It is sweet and red."},
    {"role": "user", "content": "Vote."},
    {"role": "assistant", "content": None, "tool_calls": [
        {"type": "function", "function": {"name": "vote", "arguments": '{"player": 3}'}}]},
]


def test_mask_covers_exactly_the_assistant_text(make_engine):
    tok = make_engine().tokenizer
    s = chat_sample(tok, {"messages": CONVERSATION, "tools": [{"type": "function", "function": {"name": "vote"}}]})
    written = tok.decode([t for t, m in zip(s.input_ids, s.loss_mask, strict=True) if m])
    assert written == ('It is sweet and red.<|im_end|><tool_call>\n{"name": "vote", "arguments": {"player": 3}}'
                       '\n</tool_call><|im_end|>')
    with pytest.raises(ConfigError, match="no assistant"):
        chat_sample(tok, CONVERSATION[:2])


def test_sft_steps_lower_the_loss(make_engine):
    engine = make_engine(lr=3e-3)
    data = [CONVERSATION, [{"role": "user", "content": "Say hi."}, {"role": "assistant", "content": "Hi there!"}]]
    losses = [engine.sft(data)["sft_loss"] for _ in range(8)]
    assert losses[-1] < losses[0] - 1.0, losses
    assert engine.version == 8
