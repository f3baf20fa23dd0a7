"""The openai and anthropic planners against a local scripted HTTP server (official SDKs, no network)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.scripted_api import ScriptedAPI

from vibe_rl.errors import PlannerError
from vibe_rl.planner.offline import OfflinePlanner

SEED = Path(__file__).resolve().parents[2] / "templates" / "who_is_spy" / "examples" / "seed_prompt.en.md"


@pytest.fixture(scope="module")
def good() -> dict:
    spec = OfflinePlanner().plan(SEED.read_text(encoding="utf-8")).model_dump(mode="json")
    spec["training"]["grpo_n"] = 6  # something the offline rules would not say, to see the LLM's answer is used
    return spec


def test_openai_retries_with_the_validation_error(good):
    from vibe_rl.planner.openai_planner import OpenAIPlanner

    bad = {**good, "training": {**good["training"], "batch_size": 0}}
    with ScriptedAPI(["not json at all", json.dumps(bad), "```json\n" + json.dumps(good) + "\n```"]) as api:
        spec = OpenAIPlanner(base_url=f"{api.root}/v1", api_key="sk-test", model="scripted").plan("who is spy")
    assert spec.training.grpo_n == 6
    assert len(api.requests) == 3 and all(p == "/v1/chat/completions" for p in api.paths)
    first = api.requests[0]
    assert first["response_format"]["type"] == "json_schema"
    assert first["response_format"]["json_schema"]["schema"]["title"] == "TaskSpec"
    assert first["messages"][0]["role"] == "system" and "who_is_spy" in first["messages"][0]["content"]
    assert "not valid JSON" in first["messages"][-1]["content"] or "not valid JSON" in api.requests[1]["messages"][-1]["content"]
    assert "batch_size" in api.requests[2]["messages"][-1]["content"]  # the validation error went back


def test_openai_gives_up_after_bounded_attempts(good):
    from vibe_rl.planner.openai_planner import OpenAIPlanner

    with ScriptedAPI(['{"family": "who_is_spy"}']) as api:
        planner = OpenAIPlanner(base_url=f"{api.root}/v1", api_key="sk-test", model="scripted", max_attempts=2)
        with pytest.raises(PlannerError, match="2 attempts"):
            planner.plan("who is spy")
    assert len(api.requests) == 2


def test_llm_may_say_no_family_fits():
    from vibe_rl.planner.openai_planner import OpenAIPlanner

    with ScriptedAPI([json.dumps({"family": "none", "notes": ["this is chess"]})]) as api:
        with pytest.raises(PlannerError, match="this is chess") as info:
            OpenAIPlanner(base_url=f"{api.root}/v1", api_key="sk-test", model="scripted").plan("chess")
    assert "who_is_spy" in str(info.value) and len(api.requests) == 1


def test_anthropic_tool_use_with_retry(good):
    from vibe_rl.planner.anthropic_planner import TOOL, AnthropicPlanner

    bad = {**good, "modes": [{**good["modes"][0], "servers": ["nowhere"]}]}
    with ScriptedAPI([bad, good]) as api:
        spec = AnthropicPlanner(base_url=api.root, api_key="sk-ant-test", model="scripted").plan("who is spy")
    assert spec.training.grpo_n == 6 and len(api.requests) == 2
    assert api.paths == ["/v1/messages", "/v1/messages"]
    first, second = api.requests
    assert first["tool_choice"] == {"type": "tool", "name": TOOL}
    assert first["tools"][0]["input_schema"]["title"] == "TaskSpec"
    result = second["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["is_error"] and "nowhere" in result["content"]
    assert result["tool_use_id"] == second["messages"][-2]["content"][0]["id"]


def test_cli_auto_uses_openai_when_key_is_set(good, tmp_path):
    with ScriptedAPI([json.dumps(good)]) as api:
        env = {**os.environ, "OPENAI_API_KEY": "sk-test-secret", "OPENAI_BASE_URL": f"{api.root}/v1"}
        env.pop("ANTHROPIC_API_KEY", None)
        done = subprocess.run([str(Path(sys.executable).parent / "vibe-rl"), "new", "who is spy", "--dry-run", "--json"],
                              capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["training"]["grpo_n"] == 6
    assert len(api.requests) == 1 and "sk-test-secret" not in done.stdout + done.stderr
    assert not any(tmp_path.iterdir())  # --dry-run writes nothing


def test_llm_plan_lists_the_paths_and_env_vars_it_left_out(good, monkeypatch):
    from vibe_rl.planner import plan

    text = SEED.read_text(encoding="utf-8") + "\n- Evaluate against /models/judge-7b, key in JUDGE_API_KEY\n"
    with ScriptedAPI([json.dumps(good)]) as api:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", api.url)
        spec = plan(text, planner="openai")
    assert "Evaluate against /models/judge-7b, key in JUDGE_API_KEY" in spec.unparsed
    assert not any("qwen-max" in clause or "DASHSCOPE" in clause for clause in spec.unparsed)  # those landed


def test_llm_plan_review_names_the_spec_span_of_each_value_or_says_it_is_not_stated(good, monkeypatch):
    from vibe_rl.planner import plan_reviewed

    text = SEED.read_text(encoding="utf-8")
    with ScriptedAPI([json.dumps(good)]) as api:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", api.url)
        spec, rows = plan_reviewed(text, planner="openai")
    by = {r["field"]: r for r in rows}
    assert {r["from"] for r in rows} == {"llm"}
    path = by["servers.0.model_path"]
    assert path["value"] == spec.servers[0].model_path and path["span"] and path["value"] in path["span"]
    assert path["span"] in text  # checked against the spec's own text
    assert by["training.grpo_n"]["span"] is None  # the scripted LLM's 6 is stated nowhere in the seed
    assert by["training.grpo_n"]["rule"] == "not stated in the spec: check it"
