"""A real swarm server on SmolLM2-135M-Instruct (its chat template renders no tools), driven by the openai SDK:
the tools reach the model in the documented format, the server says so, and a multi-turn conversation keeps the
sampled ids (the re-rendered prompt of call k+1 starts with call k's prompt + answer ids)."""

from __future__ import annotations

import sqlite3
from array import array

import openai
import pytest

from vibe_rl.rl.samples import Turn, build_samples, retokenized_turns
from vibe_rl.swarm import SwarmClient, Task, TrainJob, WorkflowOutput

from .conftest import FAST, Server

VOTE = {"type": "function", "function": {"name": "vote", "description": "Vote a player out.",
                                         "parameters": {"type": "object", "properties": {"player_id": {"type": "string"}},
                                                        "required": ["player_id"]}}}


@pytest.fixture(scope="module")
def smol_server(tmp_path_factory, smollm2_dir):
    server = Server(tmp_path_factory.mktemp("smol") / "exp",
                    [*FAST, "model.dtype=bfloat16", "rollout.max_tokens=10", "model.max_model_len=1024"],
                    model="smollm2").start()
    with SwarmClient(server.url) as client:
        client.auto_sync_train_config_and_start_engine(TrainJob(), verbose=False)
    yield server
    server.stop()


def _ids(blob: bytes, code: str = "i") -> list:
    out = array(code)
    out.frombytes(blob)
    return out.tolist()


def _turns(server: Server, episode_uuid: str) -> list[Turn]:
    import json

    with sqlite3.connect(f"{server.exp_dir}/swarm.sqlite") as db:
        rows = db.execute("SELECT prompt_ids, response_ids, logprobs, messages_json FROM turns WHERE episode_uuid=? "
                          "ORDER BY idx", (episode_uuid,)).fetchall()
    return [Turn(_ids(p), _ids(r), _ids(lp, "d"), messages=json.loads(m)) for p, r, lp, m in rows]


def test_status_and_log_say_how_tools_reach_the_model(smol_server):
    with SwarmClient(smol_server.url) as client:
        status = client.status()
    assert status.chat_template == {"tools": "prompt", "tool_calls": "prompt", "tool_messages": "template"}
    assert any("does not render tools" in note for note in status.notes)
    assert "does not render tools" in smol_server.output()


def test_a_tool_conversation_keeps_the_sampled_ids_and_merges(smol_server):
    client = SwarmClient(smol_server.url)
    episode_uuid, api = client.begin_episode()
    llm = openai.OpenAI(base_url=api.base_url, api_key=api.api_key, max_retries=0)
    messages = [{"role": "system", "content": "You play Who is Spy."},
                {"role": "user", "content": "Vote out player_2 or player_3 with the vote tool."}]
    first = llm.chat.completions.create(model=api.model, messages=messages, tools=[VOTE], user="civilian:p1",
                                        temperature=0)
    answer = first.choices[0].message
    messages += [{"role": "assistant", "content": answer.content},
                 {"role": "user", "content": "player_3 is out. Vote again."}]
    llm.chat.completions.create(model=api.model, messages=messages, tools=[VOTE], user="civilian:p1", temperature=0)
    # the same conversation with the model's answer edited by the client: the ids cannot continue
    edited = messages[:2] + [{"role": "assistant", "content": "Edited: " + (answer.content or "")}] + messages[3:]
    llm.chat.completions.create(model=api.model, messages=edited, tools=[VOTE], user="civilian:p1", temperature=0)
    client.end_episode(Task(task_id="smol-multi"), episode_uuid, WorkflowOutput(reward=1.0))

    turns = _turns(smol_server, episode_uuid)
    first_turn, second, third = turns
    assert second.prompt_ids[:len(first_turn.prompt_ids) + len(first_turn.response_ids)] == \
        first_turn.prompt_ids + first_turn.response_ids  # the sampled ids, verbatim, on SmolLM2's tokenizer
    assert [s.num_turns for s in build_samples(turns)] == [2, 1]
    assert retokenized_turns(turns) == 1  # the edited one: it continues the conversation, not the ids
    with sqlite3.connect(f"{smol_server.exp_dir}/swarm.sqlite") as db:
        text = db.execute("SELECT messages_json FROM turns WHERE episode_uuid=? ORDER BY idx", (episode_uuid,)).fetchone()
    assert "vote" in text[0]
