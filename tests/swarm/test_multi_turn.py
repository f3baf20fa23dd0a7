"""Multi-turn episodes keep the engine's token ids: a prompt that continues an earlier turn reuses
that turn's prompt + sampled response ids (no re-tokenisation), so the turns merge into one sample."""

from __future__ import annotations

import sqlite3
from array import array

import openai

from vibe_rl.rl.samples import Turn, build_samples
from vibe_rl.swarm import SwarmClient, Task, WorkflowOutput


def ids(blob: bytes) -> list[int]:
    out = array("i")
    out.frombytes(blob)
    return out.tolist()


def test_continued_conversation_reuses_sampled_ids_and_merges(shared_server):
    client = SwarmClient(shared_server.url)
    episode_uuid, api = client.begin_episode()
    llm = openai.OpenAI(base_url=api.base_url, api_key=api.api_key, max_retries=0)
    messages = [{"role": "system", "content": "You are player 1."}, {"role": "user", "content": "Describe your word."}]
    first = llm.chat.completions.create(model=api.model, messages=messages, user="civilian:p1")
    messages += [{"role": "assistant", "content": first.choices[0].message.content},
                 {"role": "user", "content": "Now vote."}]
    llm.chat.completions.create(model=api.model, messages=messages, user="civilian:p1")
    # Another player's fresh conversation shares no prefix with player 1's (tagged by header this time).
    llm.chat.completions.create(model=api.model, messages=[{"role": "user", "content": "Player 2 here."}],
                                extra_headers={"X-Player": "spy:p2"})
    client.end_episode(Task(task_id="multi"), episode_uuid, WorkflowOutput(reward=1.0))

    db = sqlite3.connect(f"{shared_server.exp_dir}/swarm.sqlite")
    rows = db.execute("SELECT prompt_ids, response_ids, logprobs, player FROM turns WHERE episode_uuid=? "
                      "ORDER BY idx", (episode_uuid,)).fetchall()
    (p1, r1, _, _), (p2, _, _, _), (p3, _, _, _) = rows
    assert ids(p2)[:len(ids(p1)) + len(ids(r1))] == ids(p1) + ids(r1)  # the sampled ids, verbatim
    turns = []
    for prompt, response, logprobs, player in rows:
        lp = array("d")
        lp.frombytes(logprobs)
        turns.append(Turn(ids(prompt), ids(response), lp.tolist(), player=player))
    samples = build_samples(turns)
    assert [s.num_turns for s in samples] == [2, 1]
    assert samples[0].players == ["civilian:p1"] and samples[1].players == ["spy:p2"]
