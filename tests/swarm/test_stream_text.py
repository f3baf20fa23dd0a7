"""Incremental detokenisation for streaming: deltas add up to the final text; stop strings and tool-call
markers never leak into content, even when they arrive split over several tokens."""

from __future__ import annotations

import pytest

from vibe_rl.swarm.server.chat import parse_tool_calls, trim_stop
from vibe_rl.swarm.server.stream import TextStream


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    transformers = pytest.importorskip("transformers")
    return transformers.AutoTokenizer.from_pretrained(tiny_model_dir)


def stream(tokenizer, text: str, stop: list[str], tools: bool) -> tuple[list[str], TextStream]:
    ts = TextStream(tokenizer, stop, tools)
    return [ts.push(t) for t in tokenizer.encode(text, add_special_tokens=False)], ts


@pytest.mark.parametrize("text", ["The cat sat on the mat. Ünïcödé 猫 🐈 done.", "plain words only"])
def test_deltas_add_up_to_the_decoded_text(tokenizer, text):
    deltas, ts = stream(tokenizer, text, [], False)
    assert "".join(deltas) == text and ts.rest(text) == ""
    assert sum(1 for d in deltas if d) > 2  # it really streams


def test_a_stop_string_is_held_back_and_cut(tokenizer):
    text = "alpha beta STOPHERE gamma"
    deltas, ts = stream(tokenizer, text, ["STOPHERE"], False)
    sent = "".join(deltas)
    assert "STOP" not in sent and sent + ts.rest(trim_stop(text, ["STOPHERE"])) == "alpha beta "


def test_content_stops_where_a_tool_call_starts(tokenizer):
    text = 'I vote.<tool_call>\n{"name": "vote", "arguments": {"player_id": "p2"}}\n</tool_call>'
    deltas, ts = stream(tokenizer, text, [], True)
    content, calls = parse_tool_calls(text)
    assert "".join(deltas) == "I vote." and "<" not in "".join(deltas)
    assert calls and ts.rest(content) == ""
