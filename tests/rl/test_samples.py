"""Merge rules, with conversations rendered by the tiny model's real chat template."""

from __future__ import annotations

import pytest

from vibe_rl.errors import ConfigError
from vibe_rl.rl.samples import Sample, Turn, build_samples

transformers = pytest.importorskip("transformers")

SYSTEM = {"role": "system", "content": "You are player 2 in who is spy. Your word is apple."}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    return transformers.AutoTokenizer.from_pretrained(tiny_model_dir)


def prompt(tok, messages, tools=None):
    return tok.encode(tok.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False))


def reply(tok, text):
    """What the model would have sampled: the text followed by EOS."""
    return tok.encode(text) + [tok.eos_token_id]


def fake_logprobs(ids, base):
    return [-(base + k) / 100 for k in range(len(ids))]


def test_multi_turn_conversation_merges_into_one_sample(tok):
    msgs = [SYSTEM, {"role": "user", "content": "Round 1: describe your word."}]
    p1 = prompt(tok, msgs)
    r1 = reply(tok, "It is a red fruit.")
    msgs += [{"role": "assistant", "content": "It is a red fruit."},
             {"role": "user", "content": "Round 2: now vote for the spy."}]
    p2 = prompt(tok, msgs)
    r2 = reply(tok, "I vote for player 3.")
    assert p2[:len(p1) + len(r1)] == p1 + r1  # the template re-renders the reply token for token

    [s] = build_samples([Turn(p1, r1, fake_logprobs(r1, 1), player="civilian:player_2"),
                         Turn(p2, r2, fake_logprobs(r2, 50), player="civilian:player_2", weight_version=3)],
                        task_id="7", episode_id="ep")
    assert s.input_ids == p2 + r2
    between = len(p2) - len(p1) - len(r1)  # "\n<|im_start|>user\nRound 2 ...<|im_start|>assistant\n"
    assert between > 5
    assert s.loss_mask == [0] * len(p1) + [1] * len(r1) + [0] * between + [1] * len(r2)
    assert s.old_logprobs == [0.0] * len(p1) + fake_logprobs(r1, 1) + [0.0] * between + fake_logprobs(r2, 50)
    assert (s.task_id, s.episode_id, s.num_turns, s.players) == ("7", "ep", 2, ["civilian:player_2"])
    assert s.weight_version == 0 and s.num_loss_tokens == len(r1) + len(r2)
    assert tok.decode([t for t, m in zip(s.input_ids, s.loss_mask, strict=True) if m]) == (
        "It is a red fruit.<|im_end|>I vote for player 3.<|im_end|>")


def test_tool_call_round_trip_merges(tok):
    msgs = [{"role": "user", "content": "What is the weather in Paris?"}]
    p1 = prompt(tok, msgs, TOOLS)
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    r1 = reply(tok, call)
    msgs += [{"role": "assistant", "content": "", "tool_calls": [
                 {"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
             {"role": "tool", "content": '{"temp": 20}'}]
    p2 = prompt(tok, msgs, TOOLS)
    r2 = reply(tok, "It is 20 degrees in Paris.")
    [s] = build_samples([Turn(p1, r1, fake_logprobs(r1, 0)), Turn(p2, r2, fake_logprobs(r2, 0))])
    written = tok.decode([t for t, m in zip(s.input_ids, s.loss_mask, strict=True) if m])
    assert written == call + "<|im_end|>It is 20 degrees in Paris.<|im_end|>"
    not_written = tok.decode([t for t, m in zip(s.input_ids, s.loss_mask, strict=True) if not m])
    assert "<tool_response>\n{\"temp\": 20}\n</tool_response>" in not_written
    assert "<tool_call>" in tok.decode(p1)  # the tools block itself is prompt, never trained on


def test_turns_that_do_not_extend_start_new_samples(tok):
    a1 = prompt(tok, [SYSTEM, {"role": "user", "content": "Describe your word."}])
    ra = reply(tok, "A fruit.")
    # another player's call (different system prompt) does not extend player 2's sequence
    b1 = prompt(tok, [{"role": "system", "content": "You are player 3."}, {"role": "user", "content": "Vote."}])
    rb = reply(tok, "Player 1.")
    # a call that rewrote history (summarised the first answer) does not extend either
    a2 = prompt(tok, [SYSTEM, {"role": "user", "content": "Describe your word."},
                      {"role": "assistant", "content": "Fruit"}, {"role": "user", "content": "Vote."}])
    ra2 = reply(tok, "Player 3.")
    turns = [Turn(a1, ra, fake_logprobs(ra, 0)), Turn(b1, rb, fake_logprobs(rb, 0)), Turn(a2, ra2, fake_logprobs(ra2, 0))]
    samples = build_samples(turns)
    assert [s.input_ids for s in samples] == [a1 + ra, b1 + rb, a2 + ra2]
    assert all(s.loss_mask == [0] * len(t.prompt_ids) + [1] * len(t.response_ids) for s, t in zip(samples, turns, strict=True))


def test_a_turn_extending_an_older_sample_but_not_the_last_starts_a_new_one():
    t1 = Turn([1, 2], [3], [-0.1])
    t2 = Turn([9], [8], [-0.2])
    t3 = Turn([1, 2, 3, 4], [5], [-0.3])  # extends t1, but t2 came in between
    assert [s.input_ids for s in build_samples([t1, t2, t3])] == [[1, 2, 3], [9, 8], [1, 2, 3, 4, 5]]


def test_exact_prefix_merges_and_sampling_params_must_match():
    t1 = Turn([1, 2], [3, 4], [-0.1, -0.2])
    t2 = Turn([1, 2, 3, 4, 7], [5], [-0.3])
    [s] = build_samples([t1, t2])
    assert s.input_ids == [1, 2, 3, 4, 7, 5] and s.loss_mask == [0, 0, 1, 1, 0, 1]
    assert s.old_logprobs == [0.0, 0.0, -0.1, -0.2, 0.0, -0.3]
    # same prefix but another temperature: scored under another distribution, so a new sample
    t3 = Turn([1, 2, 3, 4, 7], [5], [-0.3], temperature=0.5)
    assert len(build_samples([t1, t3])) == 2
    # a prompt equal to the previous prompt+response merges with no new prompt tokens
    [s] = build_samples([t1, Turn([1, 2, 3, 4], [6], [-0.4])])
    assert s.loss_mask == [0, 0, 1, 1, 1]


def test_malformed_turns_and_samples_raise():
    with pytest.raises(ConfigError, match="logprob"):
        Turn([1], [2, 3], [-0.1])
    with pytest.raises(ConfigError, match="empty prompt"):
        Turn([], [2], [-0.1])
    with pytest.raises(ConfigError, match="aligned"):
        Sample([1, 2], [0], [0.0, 0.0])


def test_retokenized_turns_counts_continued_conversations_whose_ids_do_not_continue():
    from vibe_rl.rl.samples import Turn, retokenized_turns

    convo = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    first = Turn([1, 2, 3], [4, 5], [-0.1, -0.2], messages=convo)
    later = convo + [{"role": "assistant", "content": "a"}, {"role": "user", "content": "next"}]
    extends = Turn([1, 2, 3, 4, 5, 6], [7], [-0.3], messages=later)
    diverges = Turn([1, 2, 3, 9, 6], [7], [-0.3], messages=later)  # the template re-rendered the answer
    other_player = Turn([8, 9], [1], [-0.1], messages=[{"role": "user", "content": "player 2"}])
    assert retokenized_turns([first, extends, other_player]) == 0
    assert retokenized_turns([first, diverges, other_player]) == 1
    assert retokenized_turns([first, extends, diverges]) == 1  # an earlier turn that extends elsewhere is no excuse
