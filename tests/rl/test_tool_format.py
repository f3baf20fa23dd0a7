"""Tools reach every model (vibe_rl.rl.tool_format), on SmolLM2's real template and the tiny model's."""

from __future__ import annotations

import json
import random

import pytest

pytest.importorskip("torch")

from vibe_rl.rl.tool_format import TemplateSupport, inline_tools, template_support  # noqa: E402

VOTE = {"type": "function", "function": {"name": "vote", "description": "Vote a player out.",
                                         "parameters": {"type": "object", "properties": {"player_id": {"type": "string"}},
                                                        "required": ["player_id"]}}}
CALL = {"id": "call_1", "type": "function", "function": {"name": "vote", "arguments": '{"player_id": "player_2"}'}}


@pytest.fixture(scope="module")
def smol_tok(smollm2_dir):
    from vibe_rl.engine.loader import load_tokenizer

    return load_tokenizer(smollm2_dir)


@pytest.fixture(scope="module")
def tiny_tok(tiny_model_dir):
    from vibe_rl.engine.loader import load_tokenizer

    return load_tokenizer(tiny_model_dir)


def test_probes_find_what_each_real_template_renders(smol_tok, tiny_tok):
    smol = template_support(smol_tok)
    assert (smol.tools, smol.tool_calls, smol.tool_messages) == (False, False, True)
    assert smol.describe() == {"tools": "prompt", "tool_calls": "prompt", "tool_messages": "template"}
    assert "does not render tools, tool calls" in smol.note()
    tiny = template_support(tiny_tok)
    assert tiny.complete and tiny.note() is None
    assert template_support(smol_tok) is smol  # probed once per tokenizer


def test_smollm2_prompts_carry_the_tools_and_the_earlier_calls(smol_tok):
    from vibe_rl.swarm.server.chat import render_text

    messages = [{"role": "system", "content": "You play a game."}, {"role": "user", "content": "Vote."},
                {"role": "assistant", "content": None, "tool_calls": [CALL]},
                {"role": "tool", "tool_call_id": "call_1", "content": "player_2 is out"},
                {"role": "user", "content": "Again."}]
    text = render_text(smol_tok, messages, [VOTE])
    assert json.dumps(VOTE) in text and "<tools>" in text  # the schema is in the system message
    assert text.index("You play a game.") < text.index("<tools>") < text.index("Vote.")
    assert '<tool_call>\n{"name": "vote", "arguments": {"player_id": "player_2"}}\n</tool_call>' in text
    assert "player_2 is out" in text
    plain = smol_tok.apply_chat_template([{"role": "user", "content": "Vote."}], tools=[VOTE], tokenize=False,
                                         add_generation_prompt=True)
    assert "vote" not in plain.lower().replace("vote.", "")  # what the template alone made of it: no tool at all
    assert render_text(smol_tok, messages, [VOTE], tool_choice="none").count("<tools>") == 0


def test_a_template_that_renders_everything_is_left_alone(tiny_tok):
    from vibe_rl.swarm.server.chat import render_text, to_template_messages

    messages = [{"role": "user", "content": "Vote."}, {"role": "assistant", "content": None, "tool_calls": [CALL]},
                {"role": "tool", "tool_call_id": "call_1", "content": "ok"}]
    assert render_text(tiny_tok, messages, [VOTE]) == tiny_tok.apply_chat_template(
        to_template_messages(messages), tools=[VOTE], add_generation_prompt=True, tokenize=False)


class _Template:
    """A tokenizer whose template fails on tool messages and knows nothing of tools (like many base models)."""

    def apply_chat_template(self, messages, tools=None, tokenize=False, add_generation_prompt=False):
        if any(m["role"] == "tool" for m in messages):
            raise ValueError("Conversation roles must alternate user/assistant")
        return "".join(f"[{m['role']}] {m['content']}\n" for m in messages)


def test_tool_messages_become_tool_responses_where_the_template_fails_on_them():
    support = TemplateSupport(_Template())
    assert (support.tools, support.tool_calls, support.tool_messages) == (False, False, False)
    out, tools = inline_tools([{"role": "user", "content": "go"},
                               {"role": "assistant", "content": "ok", "tool_calls": [CALL]},
                               {"role": "tool", "tool_call_id": "call_1", "content": "done"}], [VOTE], support)
    assert tools is None and out[0]["role"] == "system" and "<tools>" in out[0]["content"]
    assert out[2]["content"].startswith("ok\n<tool_call>")
    assert out[3] == {"role": "user", "content": "<tool_response>\ndone\n</tool_response>"}


def test_after_a_short_sft_smollm2_answers_with_tool_calls_that_parse(smollm2_dir):
    """The real model at temperature 1 practically never writes a <tool_call> (0 of 16 measured); a few SFT
    steps on the documented format (rendered the way the server prompts it) teach it. Shares before and after."""
    from vibe_rl.engine import SamplingParams, load_engine
    from vibe_rl.schema import EngineConfig, LoraConfig, TrainConfig
    from vibe_rl.swarm.server.chat import parse_tool_calls, render_prompt

    rng = random.Random(0)

    def convo() -> tuple[list[dict], str]:
        players = rng.sample(range(1, 9), 4)
        me, others = players[0], players[1:]
        ask = (f"You are player_{me}. Players alive: " + ", ".join(f"player_{p}" for p in players)
               + ". Vote out one other player with the `vote` tool.")
        return [{"role": "user", "content": ask}], f"player_{rng.choice(others)}"

    from vibe_rl.engine.loader import cpu_bf16_native

    dtype = "bfloat16" if cpu_bf16_native() else "float32"  # emulated bf16: 323 s here in CI, fp32 52 s
    engine = load_engine(EngineConfig(path="smollm2", device="cpu", dtype=dtype, max_model_len=1024,
                                      lora=LoraConfig(rank=8, alpha=16)),
                         TrainConfig(lr=2e-3, micro_batch_size=8), trainable=True)

    def parse_share(n: int = 12) -> float:
        asked = [engine.submit(render_prompt(engine.tokenizer, convo()[0], [VOTE]),
                               SamplingParams(max_tokens=40, temperature=1.0, seed=i)) for i in range(n)]
        texts = [engine.tokenizer.decode(f.result().token_ids, skip_special_tokens=True) for f in asked]
        return sum(bool(parse_tool_calls(t)[1]) for t in texts) / n

    try:
        before = parse_share()
        for _ in range(4):
            batch = []
            for _ in range(8):
                messages, target = convo()
                call = {"id": "c", "type": "function", "function": {"name": "vote", "arguments": {"player_id": target}}}
                batch.append({"messages": messages + [{"role": "assistant", "content": "", "tool_calls": [call]}],
                              "tools": [VOTE]})
            engine.sft(batch)
        after = parse_share()
    finally:
        engine.close()
    print(f"tool-call parse share at temperature 1: before SFT {before:.2f}, after 4 steps {after:.2f}")
    assert after >= 0.5 and after > before
