"""The episode context managers and role routing, against a real server driven by the openai SDK."""

from __future__ import annotations

import pytest

from vibe_rl.errors import SwarmError
from vibe_rl.swarm import LLMRouter, OpenaiBaseUrlAndApiKey, SwarmClient, Task, WorkflowOutput, open_episodes


def counts(client: SwarmClient) -> tuple[int, int]:
    pool = client.get_engine_status()["pool"]
    return pool["completed_episodes"], pool["aborted_episodes"]


def test_episode_yields_working_credentials_and_ends_with_the_reward(shared_server):
    with SwarmClient(shared_server.url) as swarm:
        done, aborted = counts(swarm)
        with swarm.episode(Task(task_id="ctx-1"), timeout=60) as ep:
            assert ep.base_url.endswith("/v1") and ep.api_key and ep.model
            reply = ep.openai().chat.completions.create(model=ep.model, user="civilian:p1",
                                                        messages=[{"role": "user", "content": "hi"}])
            assert reply.choices[0].message.content is not None
            assert ep.openai() is ep.openai()  # one client per episode
            result = ep.end(0.5, {"winner": "civilian"})
        assert result.already_ended is False and result.llm_calls == 1
        assert counts(swarm) == (done + 1, aborted)


def test_an_exception_in_the_block_aborts_the_episode_and_propagates(shared_server):
    with SwarmClient(shared_server.url) as swarm:
        _, aborted = counts(swarm)
        with pytest.raises(ZeroDivisionError), swarm.episode(Task(task_id="ctx-2")) as ep:
            ep.openai().chat.completions.create(model=ep.model, messages=[{"role": "user", "content": "hi"}])
            raise ZeroDivisionError("the game crashed")
        assert ep.closed and counts(swarm)[1] == aborted + 1
        ep.abort()  # aborting again (or an episode the server dropped) is not an error


def test_leaving_the_block_without_a_reward_is_an_error(shared_server):
    with SwarmClient(shared_server.url) as swarm:
        _, aborted = counts(swarm)
        with pytest.raises(SwarmError, match=r"without end\(reward\)"), swarm.episode(Task(task_id="ctx-3")):
            pass
        assert counts(swarm)[1] == aborted + 1


def test_open_episodes_with_per_name_tasks_and_routing(shared_server):
    team_models = {"wolf": "server1", "seer": "server1", "villager": "judge-model"}
    teams = {"wolf": "wolves", "seer": "seer", "villager": "wolves"}
    with SwarmClient(shared_server.url) as swarm:
        done, _ = counts(swarm)
        tasks = {team: Task(task_id=f"game-7-{team}") for team in ("wolves", "seer")}
        with open_episodes({"wolves": swarm, "seer": swarm}, tasks, timeout=60) as eps:
            assert eps["wolves"].api_key != eps["seer"].api_key
            router = LLMRouter(team_models, eps, trainable={"server1"}, episode_for=teams.get)
            wolf, villager = router.llm_for("wolf"), router.llm_for("villager")
            assert wolf.model == eps["wolves"].model and villager.model == "judge-model"
            assert wolf.client is villager.client  # one OpenAI client per episode
            assert router.llm_for("seer").client.api_key == eps["seer"].api_key
            message = wolf.chat([{"role": "user", "content": "Who do we attack?"}], user="wolf:player_2",
                                max_tokens=4)
            assert message.role == "assistant"
            with pytest.raises(SwarmError, match=r"missing \['seer'\]"):
                eps.end({"wolves": 1.0})
            with pytest.raises(SwarmError, match=r"unknown \['seers'\]"):  # a misspelt name: nothing is sent
                eps.end({"wolves": 1.0, "seer": 0.0, "seers": 0.0})
            eps.end({"wolves": 1.0, "seer": WorkflowOutput(reward=0.0, metadata={"team": "seer"})})
        assert counts(swarm)[0] == done + 2


def test_a_failure_while_opening_aborts_what_was_opened(shared_server):
    with SwarmClient(shared_server.url) as swarm, SwarmClient("http://127.0.0.1:9", wait_timeout=1) as nowhere:
        _, aborted = counts(swarm)
        with pytest.raises(SwarmError, match="Cannot reach"), \
                open_episodes({"server1": swarm, "server2": nowhere}, Task(task_id="ctx-5")):
            pass
        assert counts(swarm)[1] == aborted + 1


def test_router_defaults_send_static_roles_through_the_first_episode():
    endpoints = {"server1": OpenaiBaseUrlAndApiKey(base_url="http://127.0.0.1:1/v1", api_key="k1", model="m1"),
                 "server2": OpenaiBaseUrlAndApiKey(base_url="http://127.0.0.1:2/v1", api_key="k2", model="m2")}
    router = LLMRouter({"a": "server2", "b": "qwen-max"}, endpoints)
    assert (router.llm_for("a").model, router.llm_for("a").client.api_key) == ("m2", "k2")
    assert (router.llm_for("b").model, router.llm_for("b").client.api_key) == ("qwen-max", "k1")
    with pytest.raises(SwarmError, match="not in the team table"):
        router.llm_for("c")


def test_typed_status_declares_every_field_the_server_sends(shared_server):
    from vibe_rl.swarm.protocol import EngineStatus, ModelList, PoolStatus

    with SwarmClient(shared_server.url) as swarm:
        raw, status = swarm.get_engine_status(), swarm.status()
        assert status.state == "ROLLING" and status.job is not None and status.pool.grpo_n == status.job.train.grpo_n
        assert set(raw) <= set(EngineStatus.model_fields), set(raw) - set(EngineStatus.model_fields)
        assert set(raw["pool"]) <= set(PoolStatus.model_fields), set(raw["pool"]) - set(PoolStatus.model_fields)
        with swarm.episode(Task(task_id="typed"), timeout=60) as ep:
            models = ModelList.model_validate(ep.openai().models.list().model_dump())
            assert models.data[0].id == ep.model
            ep.end(1.0)


def test_client_mistakes_fail_before_any_episode_begins(shared_server):
    from vibe_rl.errors import ConfigError
    from vibe_rl.swarm import run_in_flight

    with SwarmClient(shared_server.url) as swarm:
        running = swarm.status().running_count
        with pytest.raises(ConfigError, match=r"no task for \['seer'\]"):
            with open_episodes({"wolves": swarm, "seer": swarm}, {"wolves": Task(task_id="g-1")}):
                pass
        with pytest.raises(ValueError, match="task_id"):  # a pydantic ValidationError: an empty task_id
            with swarm.episode({"task_id": ""}):
                pass
        assert swarm.status().running_count == running  # nothing was begun, so nothing is left open
        with swarm.episode({"task_id": "as-a-dict"}) as ep:  # a dict is a Task
            ep.openai().chat.completions.create(model=ep.model, messages=[{"role": "user", "content": "hi"}])
            ep.end(1.0)
        endpoints = {"a": OpenaiBaseUrlAndApiKey(base_url="http://127.0.0.1:1/v1", api_key="k", model="m")}
        with pytest.raises(SwarmError, match="not an open episode"):
            LLMRouter({"spy": "a"}, endpoints, episode_for=lambda role: "b").llm_for("spy")
        with pytest.raises(ConfigError, match="max_in_flight"):
            run_in_flight(print, [1], max_in_flight=0)
