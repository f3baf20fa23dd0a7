"""The offline tiny model: a real HF directory with a Qwen2.5-style template that renders tools."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")

MESSAGES = [
    {"role": "system", "content": "You play who is spy."},
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
    {"role": "tool", "content": '{"temp": 20}'},
    {"role": "assistant", "content": "It is 20 degrees."},
]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


def test_tiny_dir_is_a_small_hf_causal_lm(tiny_model_dir: Path):
    assert (tiny_model_dir / "model.safetensors").is_file()
    config = json.loads((tiny_model_dir / "config.json").read_text())
    assert config["model_type"] == "qwen2"
    assert "chat_template" in json.loads((tiny_model_dir / "tokenizer_config.json").read_text())
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert sum(p.numel() for p in model.parameters()) <= 5_000_000


def test_chat_template_renders_tools_and_tool_calls(tiny_model_dir: Path):
    tok = transformers.AutoTokenizer.from_pretrained(tiny_model_dir)
    text = tok.apply_chat_template(MESSAGES, tools=TOOLS, tokenize=False)
    assert text.startswith("<|im_start|>system\nYou play who is spy.\n\n# Tools")
    assert '<tools>\n{"type": "function", "function": {"name": "get_weather"' in text
    assert '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n' in text
    assert '<|im_start|>user\n<tool_response>\n{"temp": 20}\n</tool_response><|im_end|>\n' in text
    assert text.endswith("<|im_start|>assistant\nIt is 20 degrees.<|im_end|>\n")
    # dict arguments render as JSON too
    dict_args = [dict(MESSAGES[2], tool_calls=[{"function": {"name": "f", "arguments": {"a": 1}}}])]
    assert '{"name": "f", "arguments": {"a": 1}}' in tok.apply_chat_template(dict_args, tokenize=False)
    prompt = tok.apply_chat_template(MESSAGES[:2], add_generation_prompt=True, tokenize=False)
    assert prompt.endswith("<|im_start|>assistant\n")


def test_tokenizer_round_trips_and_keeps_markup_tokens(tiny_model_dir: Path):
    tok = transformers.AutoTokenizer.from_pretrained(tiny_model_dir)
    text = '<tool_call>\n{"name": "vote", "arguments": {"player": 3}}\n</tool_call><|im_end|>'
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    for marker in ("<tool_call>", "</tool_call>", "<|im_end|>"):
        assert tok.convert_tokens_to_ids(marker) in ids
    assert tok.eos_token == "<|im_end|>"
    # byte-level: any text round-trips, and English compresses below one token per 2 characters
    assert tok.decode(tok.encode("héllo ✓ 谁是卧底")) == "héllo ✓ 谁是卧底"
    sentence = "The player describes the word and then everyone votes for the spy."
    assert len(tok.encode(sentence)) < len(sentence) / 2


def test_ensure_tiny_model_caches_and_concurrent_builds_agree(tmp_path: Path):
    code = "import sys; from vibe_rl.engine.tiny import ensure_tiny_model; print(ensure_tiny_model(sys.argv[1]))"
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert outs[0] == outs[1]
    built = Path(outs[0])
    assert (built / "vibe_rl_tiny.json").is_file()
    assert [p.name for p in tmp_path.iterdir()] == [built.name]  # no temporary dirs left behind
    from vibe_rl.engine.tiny import ensure_tiny_model

    assert ensure_tiny_model(tmp_path) == built
