"""The offline planner: seed prompts (Chinese and English), other phrasings, unsupported specs."""

from __future__ import annotations

from pathlib import Path

import pytest

from vibe_rl.autopilot import identity
from vibe_rl.errors import PlannerError
from vibe_rl.planner import plan, resolve
from vibe_rl.planner.offline import OfflinePlanner

EXAMPLES = Path(__file__).resolve().parents[2] / "templates" / "who_is_spy" / "examples"
MODEL = "/mnt/data_cpfs/model_cache/modelscope/hub/Qwen/Qwen/Qwen2.5-7B-Instruct"


@pytest.mark.parametrize("prompt", ["seed_prompt.zh.md", "seed_prompt.en.md"])

def test_seed_prompt_values(prompt):
    spec = OfflinePlanner().plan((EXAMPLES / prompt).read_text(encoding="utf-8"))
    assert spec.family == "who_is_spy" and spec.short_name == "spy"
    assert spec.gpus == 8
    assert spec.training.batch_size == 16
    assert {s.model_path for s in spec.servers} == {MODEL}
    # agent_roll: civilians share the trainable model on 4 GPUs; spies play qwen-max with DASHSCOPE_API_KEY
    assert spec.model_for_role("civilian", "agent_roll").model_dump() == {
        "role": "civilian", "team": "civilians", "kind": "server", "name": "server1", "server": "server1"}
    spy = spec.model_for_role("spy", "agent_roll")
    assert (spy.kind, spy.name, spy.server) == ("static", "qwen-max", "server1")
    (qwen,) = spec.static_models
    assert qwen.api_key_env == "DASHSCOPE_API_KEY" and "dashscope" in qwen.base_url
    assert [s.name for s in spec.servers_for("agent_roll")] == ["server1"]
    assert spec.gpu_split("agent_roll") == {"server1": [0, 1, 2, 3]}
    # agent_roll_adv: civilians on server 1, spies on server 2, 4 GPUs each
    assert spec.model_for_role("civilian", "agent_roll_adv").name == "server1"
    assert spec.model_for_role("spy", "agent_roll_adv").name == "server2"
    assert spec.gpu_split("agent_roll_adv") == {"server1": [0, 1, 2, 3], "server2": [4, 5, 6, 7]}
    assert spec.mode("agent_roll_adv").rewarded == {"server1": "civilians", "server2": "spies"}
    assert [s.port for s in spec.servers] == [10086, 10087]
    folder = Path("/projects/demo")  # vibe-rl run names sessions after the project: <short>-<hash>-swarm-...
    names = [n.replace(f"-{identity.key(folder)}-", "-") for n in identity.all_sessions(spec, folder)]
    assert names == ["spy-swarm-server", "spy-swarm-server-2", "spy-swarm-client"]
    assert (spec.reward.win, spec.reward.loss) == (1.0, 0.0)
    assert spec.constraints.no_chinese_in_code and spec.constraints.random_ids_and_names


def test_chinese_and_english_seed_agree():
    zh, en = (OfflinePlanner().plan((EXAMPLES / f).read_text(encoding="utf-8"))
              for f in ("seed_prompt.zh.md", "seed_prompt.en.md"))
    assert zh == en


def test_short_english_spec_with_other_numbers():
    spec = OfflinePlanner().plan(
        "Train who is spy: 8 players with 2 spies, model Qwen/Qwen2.5-3B-Instruct, 2 GPUs, batch size 8, "
        "grpo_n 6, lr 2e-6, save_freq 10. The spies play gpt-4o-mini. Winners get 1, losers get -1.")
    assert spec.game["num_players"] == 8 and spec.game["num_spies"] == 2
    assert spec.servers[0].model_path == "Qwen/Qwen2.5-3B-Instruct"
    assert (spec.training.batch_size, spec.training.grpo_n, spec.training.lr, spec.training.save_freq) == (8, 6, 2e-6, 10)
    assert spec.gpu_split("agent_roll") == {"server1": [0, 1]}
    assert spec.gpu_split("agent_roll_adv") == {"server1": [0], "server2": [1]}
    assert spec.model_for_role("spy", "agent_roll").name == "gpt-4o-mini"
    assert spec.static_models[0].api_key_env == "OPENAI_API_KEY"
    assert (spec.reward.win, spec.reward.loss) == (1.0, -1.0)


def test_trainable_spies_against_static_civilians():
    spec = OfflinePlanner().plan("谁是卧底：卧底共享一个可训练模型，平民使用 qwen-plus。4 张卡，batch size 4")
    assert spec.model_for_role("spy", "agent_roll").name == "server1"
    assert spec.model_for_role("civilian", "agent_roll").name == "qwen-plus"
    assert spec.mode("agent_roll").rewarded == {"server1": "spies"}
    assert spec.servers[0].model_path == "tiny" and any("tiny" in n for n in spec.notes)


@pytest.mark.parametrize("text", ["Train a Diplomacy agent with self-play on 8 GPUs", "训练一个玩三国杀的智能体"])
def test_unsupported_spec_says_what_is_supported(text):
    with pytest.raises(PlannerError) as info:
        OfflinePlanner().plan(text)
    message = str(info.value)
    assert "who_is_spy" in message and "--planner openai" in message and "vibe-rl-new" in message


def test_empty_spec_is_refused():
    with pytest.raises(PlannerError):
        OfflinePlanner().plan("   ")


def test_auto_picks_by_keys(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert resolve("auto") == "offline"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "x")
    assert resolve("auto") == "anthropic"
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    assert resolve("auto") == "openai"
    with pytest.raises(PlannerError):
        resolve("gemini")


def test_name_override_is_validated():
    assert plan("who is spy", planner="offline", name="my_spy").name == "my_spy"
    with pytest.raises(PlannerError):
        plan("who is spy", planner="offline", name="Bad Name!")


@pytest.mark.parametrize("text,total,per_mode", [
    ("use 8 GPUs", 8, {}), ("8卡训练", 8, {}), ("使用 8 GPU 训练", 8, {}), ("on 2 H100s", 2, {}),
    ("7B model, Batch Size 16", None, {}), ("使用八张显卡", 8, {}),
    ("agent_roll: 2 gpus\nagent_roll_adv: server 1 and server 2 use 3 GPUs each", None,
     {"agent_roll": 2, "agent_roll_adv": 3}),
])
def test_gpu_phrasings(text, total, per_mode):
    from vibe_rl.planner.servers import gpu_facts
    from vibe_rl.planner.text import SpecText

    found = gpu_facts(SpecText(text))
    assert (found.total.value if found.total else None) == total
    assert {mode: f.value for mode, f in found.mode_per_server.items()} == per_mode


def test_one_server_family_reads_what_is_said_of_server_1():
    """werewolves and turn_based share common.first_server: the path, port and GPU count said of server 1 are
    its own, and nothing of that clause is left not understood."""
    spec = OfflinePlanner().plan("Nim, server 1 uses 4 GPUs on port 9100, model /m/q7b", family="turn_based")
    server = spec.servers[0]
    assert (server.model_path, server.port, server.gpus, spec.gpus) == ("/m/q7b", 9100, 4, 4)
    assert spec.unparsed == []
    spec = OfflinePlanner().plan("werewolves, the seer trains; server 1 uses 2 GPUs on port 9200")
    assert (spec.servers[0].port, spec.servers[0].gpus, spec.gpus) == (9200, 2, 2)
    assert any("No base model path found" in n for n in spec.notes)


@pytest.mark.parametrize("junk", ["{" * 3000 + "}" * 3000, "{'a': " + "[" * 3000 + "]" * 3000 + "}", "{{'a': 1}}"])
def test_brace_junk_is_no_structure_and_no_crash(junk):
    """Braces that are no JSON object or dict literal (nested too deep, a set of dicts) are left as text: the
    spec still plans, with the values around them read."""
    spec = OfflinePlanner().plan(f"who is spy, 7 players, 2 spies, /m/q7b, 4 GPUs {junk}")
    assert (spec.game["num_players"], spec.game["num_spies"], spec.gpus) == (7, 2, 4)


def test_a_python_dict_literal_is_read_as_structure():
    spec = OfflinePlanner().plan("config = {'game': 'who_is_spy', 'players': 7, 'spies': 2, 'gpus': 4, 'model': '/m/q3b'}")
    assert (spec.game["num_players"], spec.game["num_spies"], spec.gpus) == (7, 2, 4)
    assert any("JSON object" in note for note in spec.notes)
