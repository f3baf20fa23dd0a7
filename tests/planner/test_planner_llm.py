"""The openai and anthropic planners against a local scripted HTTP server (official SDKs, no network): the
answer's shape and retries; every value the LLM sets is used only where its quote is in the spec."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.scripted_api import Refusal, ScriptedAPI

from vibe_rl.errors import PlannerError
from vibe_rl.planner import plan_full
from vibe_rl.planner.offline import OfflinePlanner
from vibe_rl.planner.review import review

SEED = Path(__file__).resolve().parents[2] / "templates" / "who_is_spy" / "examples" / "seed_prompt.en.md"
SPEC = ("谁是卧底 RL：8 个玩家，2 个卧底。平民用 /models/Qwen2.5-7B-Instruct 训练，卧底用 qwen-max。4 张卡，batch size 32，"
        "学习率 2e-6。上次每 15 步存一次，结果盘满了。")


def quoted(text: str) -> dict:
    """The offline plan of `text` as an LLM answer: {"plan": TaskSpec, "quotes": the offline spans}."""
    planner = OfflinePlanner()
    spec = planner.plan(text)
    rows = review(spec, text, "offline", planner.read)
    return {"plan": spec.model_dump(mode="json"),
            "quotes": {r["field"]: r["span"] for r in rows if r["from"] == "spec" and r["span"] in text}}


@pytest.fixture(scope="module")
def answer() -> dict:
    return quoted(SPEC)


def with_values(answer: dict, quotes: dict | None = None, **training) -> dict:
    plan = {**answer["plan"], "training": {**answer["plan"]["training"], **training}}
    return {"plan": plan, "quotes": {**answer["quotes"], **(quotes or {})}}


def test_openai_quoted_values_are_used_and_an_unquoted_one_is_not(answer, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    reply = with_values(answer, quotes={"training.temperature": "temperature 0.7"}, grpo_n=6, temperature=0.7)
    with ScriptedAPI([json.dumps(reply)]) as api:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", api.url)
        spec, rows, used = plan_full(SPEC)  # auto: the key is set, so the LLM plans
    assert used == "openai" and api.paths == ["/v1/chat/completions"]
    assert api.requests[0]["response_format"]["json_schema"]["schema"]["title"] == "QuotedTaskSpec"
    assert (spec.game["num_players"], spec.game["num_spies"], spec.gpus) == (8, 2, 4)
    assert (spec.training.batch_size, spec.training.lr) == (32, 2e-6)
    assert spec.servers[0].model_path == "/models/Qwen2.5-7B-Instruct" and spec.model_for_role("spy", "agent_roll").name == "qwen-max"
    assert spec.training.grpo_n == 4 and spec.training.temperature == 1.0  # no quote / a quote not in the spec
    assert any(u.startswith("training.grpo_n = 6: the LLM's value is not used (it quotes nothing") for u in spec.unparsed)
    assert any(u.startswith("training.temperature = 0.7") and "'temperature 0.7' is not in the spec" in u
               for u in spec.unparsed)
    by = {r["field"]: r for r in rows}
    assert by["training.batch_size"] == {"field": "training.batch_size", "value": "32", "from": "llm",
                                         "span": answer["quotes"]["training.batch_size"], "rule": None}
    assert by["training.grpo_n"]["from"] == "default" and by["training.grpo_n"]["span"] is None
    assert all(r["span"] in SPEC for r in rows if r["from"] == "llm" and r["span"])


def test_a_quote_must_state_the_value_and_not_be_background(answer):
    from vibe_rl.planner.quotes import check
    from vibe_rl.schema.spec import TaskSpec

    reply = with_values(answer, quotes={"training.save_freq": "上次每 15 步存一次", "training.batch_size": "4 张卡"},
                        save_freq=15, batch_size=4)
    spec, _ = check(TaskSpec.model_validate(reply["plan"]), reply["quotes"], SPEC)
    assert spec.training.save_freq == 5 and spec.training.batch_size == 16  # the family's defaults
    assert any("save_freq = 15" in u and "background" in u for u in spec.unparsed)
    assert any("batch_size = 4" in u and "'4 张卡'" in u for u in spec.unparsed)


def test_whitespace_in_a_quote_may_differ_and_a_rejected_wiring_restores_the_family_seating(answer):
    from vibe_rl.planner.quotes import check
    from vibe_rl.schema.spec import TaskSpec

    reply = json.loads(json.dumps(answer))
    reply["quotes"]["training.batch_size"] = "batch   size\n32"
    reply["quotes"]["wire.agent_roll.spy"] = "the spies are played by qwen-max"  # not in the spec
    spec, rows = check(TaskSpec.model_validate(reply["plan"]), reply["quotes"], SPEC)
    assert spec.training.batch_size == 32
    assert spec.model_for_role("spy", "agent_roll").name == "opponent" and not any(
        m.name == "qwen-max" for m in spec.static_models)
    assert any(u.startswith("wire.agent_roll.spy = qwen-max") for u in spec.unparsed)
    assert any("卧底用 qwen-max" in u for u in spec.unparsed)  # the clause the plan no longer holds is listed


def test_numbers_the_llm_left_out_are_not_understood(answer):
    from vibe_rl.planner.quotes import check
    from vibe_rl.schema.spec import TaskSpec

    text = SPEC + "每个 prompt 采样 8 次。"
    spec, _ = check(TaskSpec.model_validate(answer["plan"]), answer["quotes"], text)
    assert spec.training.grpo_n == 4 and any("采样 8 次" in u for u in spec.unparsed)
    assert not any("15" in u for u in spec.unparsed)  # the background sentence sets nothing and is not listed


def test_openai_retries_with_the_validation_error(answer):
    from vibe_rl.planner.llm import OpenAIPlanner

    bad = with_values(answer, batch_size=0)
    with ScriptedAPI(["not json at all", json.dumps(bad), "```json\n" + json.dumps(answer) + "\n```"]) as api:
        spec, quotes = OpenAIPlanner(base_url=api.url, api_key="sk-test", model="scripted").plan_quoted(SPEC)
    assert spec.training.batch_size == 32 and quotes == answer["quotes"] and len(api.requests) == 3
    first = api.requests[0]
    assert first["messages"][0]["role"] == "system" and "who_is_spy" in first["messages"][0]["content"]
    assert "quotes" in first["messages"][0]["content"]
    assert "not valid JSON" in api.requests[1]["messages"][-1]["content"]
    assert "batch_size" in api.requests[2]["messages"][-1]["content"]  # the validation error went back


def test_llm_may_say_no_family_fits():
    from vibe_rl.planner.llm import OpenAIPlanner

    with ScriptedAPI([json.dumps({"plan": {"family": "none", "notes": ["this is chess"]}})]) as api:
        with pytest.raises(PlannerError, match="this is chess") as info:
            OpenAIPlanner(base_url=api.url, api_key="sk-test", model="scripted").plan("chess")
    assert "who_is_spy" in str(info.value) and len(api.requests) == 1


def test_anthropic_tool_use_with_retry_and_quotes(answer, monkeypatch):
    from vibe_rl.planner.llm import TOOL

    bad = {**answer, "plan": {**answer["plan"], "modes": [{**answer["plan"]["modes"][0], "servers": ["nowhere"]}]}}
    with ScriptedAPI([bad, with_values(answer, grpo_n=6)]) as api:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.root)
        spec, rows, used = plan_full(SPEC)
    assert used == "anthropic" and api.paths == ["/v1/messages", "/v1/messages"]
    assert spec.training.batch_size == 32 and spec.training.grpo_n == 4  # 6 had no quote
    first, second = api.requests
    assert first["tool_choice"] == {"type": "tool", "name": TOOL}
    assert first["tools"][0]["input_schema"]["title"] == "QuotedTaskSpec"
    result = second["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["is_error"] and "nowhere" in result["content"]
    assert {r["field"]: r["from"] for r in rows}["training.lr"] == "llm"


def test_a_failing_api_falls_back_to_the_offline_reader_and_says_so(monkeypatch):
    refusal = Refusal(400, {"error": {"message": "model not found", "type": "invalid_request_error"}})
    with ScriptedAPI([refusal]) as api:
        monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", api.url)
        spec, rows, used = plan_full(SPEC)
    assert used == "offline (fallback)" and len(api.requests) == 1
    assert spec.notes[0].startswith("The openai planner could not plan this spec") and "offline reader" in spec.notes[0]
    assert spec.training.batch_size == 32 and {r["from"] for r in rows} <= {"spec", "default"}


def test_cli_auto_uses_openai_when_key_is_set_and_falls_back_when_it_fails(answer, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    vibe = str(Path(sys.executable).parent / "vibe-rl")
    with ScriptedAPI([json.dumps(answer)]) as api:
        done = subprocess.run([vibe, "new", SPEC, "--dry-run"], capture_output=True, text=True, cwd=tmp_path,
                              env={**env, **api.env()}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "planner: openai;" in done.stdout and "llm: '4 张卡'" in done.stdout
    assert "sk-test-secret" not in done.stdout + done.stderr and not any(tmp_path.iterdir())
    with ScriptedAPI([Refusal(401, {"error": {"message": "bad key", "type": "auth"}})]) as api:
        done = subprocess.run([vibe, "new", SPEC, "--dry-run"], capture_output=True, text=True, cwd=tmp_path,
                              env={**env, **api.env()}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "planner: offline (fallback);" in done.stdout and "planned by the offline reader instead" in done.stdout
    assert "sk-test-secret" not in done.stdout + done.stderr


def test_llm_plan_of_the_seed_lists_what_it_left_out(monkeypatch):
    text = SEED.read_text(encoding="utf-8") + "\n- Evaluate against /models/judge-7b, key in JUDGE_API_KEY\n"
    with ScriptedAPI([json.dumps(quoted(SEED.read_text(encoding="utf-8")))]) as api:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", api.url)
        spec, rows, _ = plan_full(text, planner="openai")
    assert any("/models/judge-7b" in u for u in spec.unparsed)
    assert not any("qwen-max" in u or "DASHSCOPE" in u for u in spec.unparsed)  # those landed
    by = {r["field"]: r for r in rows}
    assert by["servers.0.model_path"]["from"] == "llm" and by["servers.0.model_path"]["span"] in text
