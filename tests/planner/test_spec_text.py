"""SpecText: what counts as a fact to report, and number words."""

from __future__ import annotations

import pytest

from vibe_rl.planner.text import SpecText, to_int


@pytest.mark.parametrize("word,value", [("8", 8), ("八", 8), ("两", 2), ("十", 10), ("十二", 12), ("二十四", 24),
                                        ("three", 3), ("a pair of", 2), ("一万", 10000), ("两万五千", 25000),
                                        ("十万", 100000), ("一万零五百", 10500)])
def test_number_words(word, value):
    assert to_int(word) == value


def test_references_and_sizes_are_not_facts():
    text = "1. Agent 2 uses a 7B model on server 1\n- optional 0. team A\n3) 第 3 轮 and player 4 speaks"
    assert SpecText(text).unparsed([]) == []


def test_unplaced_facts_are_reported_by_clause():
    src = SpecText("Train it well. Use 3 seeds; set HF_HOME and load /data/extra. Batch 8.")
    batch = src.search(r"Batch (\d+)")
    assert batch is not None
    assert src.unparsed([]) == ["Use 3 seeds", "set HF_HOME and load /data/extra"]
    assert src.unparsed(["/data/extra", "HF_HOME"]) == ["Use 3 seeds"]  # strings that landed in the plan
    assert src.unparsed([], numbers=False) == ["set HF_HOME and load /data/extra"]


def test_a_chinese_one_line_spec_reports_the_part_holding_the_fact():
    text = "用 4 张卡训练狼人杀，batch 8，每局跑 3 遍"
    src = SpecText(text)
    src.search(r"batch (\d+)")
    src.search(r"(\d+) 张卡")
    assert src.unparsed([]) == ["每局跑 3 遍"]


def test_player_counts_are_facts_even_after_the_noun():
    assert SpecText("玩家 8 人").unparsed([]) == ["玩家 8 人"]


def test_a_long_clause_is_reported_by_the_part_around_its_fact():
    text = ("Train the civilians so that they vote more carefully and describe their word without giving it "
            "away to the spies while using a warmup of 25 steps and a batch of 16 overall")
    src = SpecText(text)
    src.search(r"batch of (\d+)")
    [entry] = src.unparsed([])
    assert "warmup of 25 steps" in entry and len(entry) <= 80 and not entry.startswith(" ")


def test_a_number_next_to_chinese_characters_is_a_fact():
    assert SpecText("把热身步数设置为20步").unparsed([]) == ["把热身步数设置为20步"]


def test_an_api_key_env_var_is_not_a_model_name():
    import re

    from vibe_rl.planner.text import MODEL_NAME

    names = [m.group() for m in re.finditer(MODEL_NAME, "mistral-large-2 via MISTRAL_API_KEY, DEEPSEEK_API_KEY", re.I)]
    assert names == ["mistral-large-2"]


@pytest.mark.parametrize("text,plain", [("total_steps: 1,000,", "total_steps: 1000,"), ("训练1.5万步", "训练15000步"),
                                        ("10_000 steps", "10000 steps"), ("ports 10086,10087", "ports 10086,10087"),
                                        ("bs=32,n=8", "bs=32,n=8")])
def test_grouped_digits(text, plain):
    from vibe_rl.planner.numbers import rewrite_grouped

    assert rewrite_grouped(text)[0] == plain


@pytest.mark.parametrize("text,plain", [("two nodes of 8 GPUs", "8 GPUs"), ("16 GPUs across 2 nodes", "8 GPUs"),
                                        ("2机16卡", "8 GPUs"), ("两台机器，每台 8 卡", "8 GPUs"), ("单卡", "1 张卡"),
                                        ("2 nodes, 8 GPUs", "2 nodes, 8 GPUs"), ("两台服务器各四张卡", "两台服务器各四张卡")])
def test_node_counts_become_one_nodes_gpus(text, plain):
    from vibe_rl.planner.numbers import rewrite_nodes

    out, notes = rewrite_nodes(text)
    assert out == plain
    assert bool(notes) == ("node" in text or "机" in text)
