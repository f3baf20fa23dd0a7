"""A call sent with `context_only` (vibe-rl's extension field) is recorded and shapes later prompts, but its
tokens are never trained: the update's loss covers the other calls' answers alone."""

from __future__ import annotations

import sqlite3

from vibe_rl.rl.samples import Turn, build_samples
from vibe_rl.swarm import SwarmClient, Task, TrainJob
from vibe_rl.swarm.server.pool import CompletedEpisode
from vibe_rl.swarm.server.store import Store


def test_context_only_calls_are_recorded_but_only_the_other_answers_are_trained(make_server):
    server = make_server("ctx", sets=["train.batch_size=1", "train.grpo_n=2"])
    trained_tokens = 0
    with SwarmClient(server.url) as swarm:
        swarm.auto_sync_train_config_and_start_engine(TrainJob(), verbose=False)
        for reward in (0.0, 1.0):  # the second end fills the group: update 1
            with swarm.episode(Task(task_id="ctx")) as ep:
                llm = ep.openai()
                messages = [{"role": "user", "content": "Describe your word."}]
                first = llm.chat.completions.create(model=ep.model, messages=messages, max_tokens=6,
                                                    user="civilian:p1", extra_body={"context_only": True})
                messages += [{"role": "assistant", "content": first.choices[0].message.content},
                             {"role": "user", "content": "Now vote."}]
                second = llm.chat.completions.create(model=ep.model, messages=messages, max_tokens=4,
                                                     user="civilian:p1")
                trained_tokens += second.usage.completion_tokens
                result = ep.end(reward)
            assert result.llm_calls == 2 and result.trainable_turns == 1
        (update,) = server.wait_updates(swarm)
    update = update.model_dump()
    assert update["num_loss_tokens"] == trained_tokens and update["trainable_turns"] == 2
    assert update["num_samples"] == 2  # the vote extends the description by ids: one sample, its first answer masked

    rows = sqlite3.connect(f"{server.exp_dir}/swarm.sqlite").execute(
        "SELECT context_only FROM turns ORDER BY ts, idx").fetchall()
    assert [r[0] for r in rows] == [1, 0, 1, 0]


def test_a_context_turn_joins_the_next_sample_as_prompt_and_survives_a_restart(tmp_path):
    context = Turn([1, 2], [3, 4], [-0.1, -0.2], context_only=True)
    vote = Turn([1, 2, 3, 4, 5], [6], [-0.3])
    assert not context.trainable and vote.trainable
    (sample,) = build_samples([t for t in (context, vote) if t.trainable])  # the server's filter (updates.py)
    assert sample.input_ids == [1, 2, 3, 4, 5, 6] and sample.loss_mask == [0, 0, 0, 0, 0, 1]

    old = tmp_path / "old.sqlite"  # a database written before the column existed gets it, and keeps its rows
    db = sqlite3.connect(old)
    db.execute("CREATE TABLE turns (episode_uuid TEXT NOT NULL, idx INTEGER NOT NULL, player TEXT, model TEXT, "
               "static INTEGER, weight_version INTEGER, messages_json TEXT, response_text TEXT, prompt_ids BLOB, "
               "response_ids BLOB, logprobs BLOB, temperature REAL, top_p REAL, ts REAL, "
               "PRIMARY KEY (episode_uuid, idx))")
    db.execute("INSERT INTO turns (episode_uuid, idx, player) VALUES ('e0', 0, 'p')")
    db.commit()
    db.close()
    store = Store(old)
    store.save_episode(CompletedEpisode("e1", "t", 1.0, [context, vote], 1.0), {"task_id": "t"}, {})
    (episode,) = [e for e in store.untrained(0) if e.episode_uuid == "e1"]
    assert [t.context_only for t in episode.turns] == [True, False]
    store.close()
