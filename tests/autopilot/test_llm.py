"""The fix LLM client through the official openai SDK against a local scripted server."""

import pytest
from helpers.scripted_api import ScriptedAPI

from vibe_rl.autopilot.llm import AnthropicFixLLM, OpenAIFixLLM, llm_from_env
from vibe_rl.errors import ConfigError


def test_openai_client_talks_to_a_compatible_server():
    with ScriptedAPI(["WHY: x\nfirst", "second"]) as server:
        llm = llm_from_env(server.env(VIBE_RL_FIX_MODEL="scripted-fixer"))
        assert isinstance(llm, OpenAIFixLLM)
        assert llm.complete("sys", "fix it") == "WHY: x\nfirst"
        assert llm.complete("sys", "again") == "second"
        assert server.requests[0]["model"] == "scripted-fixer"
        assert server.requests[0]["messages"] == [{"role": "system", "content": "sys"},
                                                  {"role": "user", "content": "fix it"}]
        assert server.auth[0] == "Bearer sk-test-secret-do-not-print"
        assert "secret" not in llm.describe() and "127.0.0.1" in llm.describe()


def test_provider_selection_from_env():
    assert llm_from_env({}) is None
    assert isinstance(llm_from_env({"ANTHROPIC_API_KEY": "k"}), AnthropicFixLLM)
    llm = llm_from_env({"ANTHROPIC_API_KEY": "k", "VIBE_RL_FIX_MODEL": "claude-x"})
    assert llm.describe() == "anthropic:claude-x @ api.anthropic.com"
    with pytest.raises(ConfigError):
        llm_from_env({"VIBE_RL_FIX_PROVIDER": "nope"})


def test_anthropic_client_talks_to_a_messages_endpoint():
    with ScriptedAPI(["WHY: y\nblock"]) as server:
        env = {"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": server.url.removesuffix("/v1"),
               "VIBE_RL_FIX_MODEL": "claude-scripted"}
        llm = llm_from_env(env)
        assert isinstance(llm, AnthropicFixLLM)
        assert llm.complete("sys", "fix it") == "WHY: y\nblock"
        req = server.requests[0]
        assert req["model"] == "claude-scripted" and req["system"] == "sys"
        assert req["messages"] == [{"role": "user", "content": "fix it"}]
        assert server.auth[0].removeprefix("Bearer ") == "sk-ant-test"  # x-api-key or bearer, by SDK version
