"""GRPO groups as values: the begin's group key, the keys of one server's teams, play_groups; against one real
server (the module's shared one), plus the pure rules without a server."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import httpx
import pytest

from tests.swarm.conftest import admin
from vibe_rl.errors import ConfigError
from vibe_rl.swarm import AsyncSwarmClient, Group, SwarmClient, Task, TrainJob, WorkflowOutput, play_groups
from vibe_rl.swarm.client.episodes import group_keys
from vibe_rl.swarm.client.groups import schedule_groups
from vibe_rl.swarm.observe.traces import TraceReader


def stored_groups(server) -> dict[str, list[str]]:
    """The stored episodes' uuids by group key (the store's task_id column)."""
    out: dict[str, list[str]] = {}
    for ep in TraceReader(server.exp_dir).episodes(limit=10_000):
        out.setdefault(ep["task_id"], []).append(ep["episode_uuid"])
    return out


def sync(server) -> SwarmClient:
    swarm = SwarmClient(server.url)
    swarm.job = TrainJob.model_validate(swarm.get_engine_status()["job"])  # what the shared server runs
    return swarm


def test_a_begin_names_the_group_and_the_task_stays_as_it_is(shared_server):
    with sync(shared_server) as swarm:
        task = Task(task_id="grp-1", main_query="q")
        with swarm.episode(task, timeout=60, group="grp-1/hard") as ep:
            ep.openai().chat.completions.create(model=ep.model, messages=[{"role": "user", "content": "hi"}])
            first = ep.end(1.0)
        assert ep.group == "grp-1/hard" and not first.already_ended
        # a repeated end (same task, same reward) is still idempotent: the stored task_id is the task's
        assert ep.end(1.0).already_ended
        with swarm.episode(task, timeout=60) as plain:  # no group: pooled under the task_id, as AgentJet's swarm
            plain.openai().chat.completions.create(model=plain.model, messages=[{"role": "user", "content": "hi"}])
            plain.end(0.0)
        rows = {row["task_id"]: row["episodes"] for row in swarm.get_engine_status()["tasks"]}
        assert rows["grp-1/hard"] == 1 and rows["grp-1"] == 1
        groups = stored_groups(shared_server)
        assert "grp-1/hard" in groups and "grp-1" in groups


def test_a_group_key_longer_than_a_task_id_may_be_is_refused(shared_server):
    resp = httpx.post(f"{shared_server.url}/episode/begin", headers=admin(shared_server.url),
                      json={"group": "g" * 10_000})
    assert resp.status_code == 400 and resp.json()["error"]["code"] == "group_too_long"
    resp = httpx.post(f"{shared_server.url}/episode/begin", headers=admin(shared_server.url), json={"group": ""})
    assert resp.status_code == 400  # an empty key is a validation error, not the task_id's group


def test_play_groups_plays_each_group_under_its_key_and_aborts_a_failed_play(shared_server):
    calls: list[str] = []
    ended: list[tuple[str, float]] = []

    def play(task: Task, creds) -> WorkflowOutput:
        calls.append(task.task_id)
        if len(calls) == 2:
            raise RuntimeError("the game crashed")  # aborted, then played again by the retry
        from openai import OpenAI

        OpenAI(base_url=creds.base_url, api_key=creds.api_key).chat.completions.create(
            model=creds.model, messages=[{"role": "user", "content": task.main_query}], max_tokens=2)
        return WorkflowOutput(reward=float(len(calls) % 2))

    with sync(shared_server) as swarm:
        aborted = swarm.get_engine_status()["pool"]["aborted_episodes"]
        group = swarm.group(Task(task_id="grp-2", main_query="hello"), key="grp-2/solo")
        report = play_groups(swarm, [group], play, timeout=60, on_end=lambda g, out: ended.append((g.key, out.reward)))
        assert (report.succeeded, report.failed, report.retried) == (group.n, 0, 1)
        assert len(ended) == group.n == swarm.job.grpo_n and {key for key, _ in ended} == {"grp-2/solo"}
        assert swarm.get_engine_status()["pool"]["aborted_episodes"] == aborted + 1
        assert len(stored_groups(shared_server)["grp-2/solo"]) == group.n
        with pytest.raises(ConfigError, match="grpo_n"):  # a group that could never fill is refused before it plays
            play_groups(swarm, [Group.of(Task(task_id="grp-3"), swarm.job.grpo_n + 1)], play)
        assert len(calls) == group.n + 1


def test_two_teams_on_one_server_are_two_groups(shared_server):
    with sync(shared_server) as swarm:
        from vibe_rl.swarm import open_episodes

        with open_episodes({"wolves": swarm, "seer": swarm}, Task(task_id="grp-4"), timeout=60, group="grp-4") as eps:
            assert (eps["wolves"].group, eps["seer"].group) == ("grp-4/wolves", "grp-4/seer")
            for ep in eps.values():
                ep.openai().chat.completions.create(model=ep.model, messages=[{"role": "user", "content": "hi"}])
            eps.end({"wolves": 1.0, "seer": 0.0})
        groups = stored_groups(shared_server)
        assert len(groups["grp-4/wolves"]) == len(groups["grp-4/seer"]) == 1


def test_the_async_client_sends_the_group(shared_server):
    async def main() -> str | None:
        async with AsyncSwarmClient(shared_server.url) as swarm:
            async with swarm.episode(Task(task_id="grp-5"), timeout=60, group="grp-5/async") as ep:
                await ep.openai().chat.completions.create(model=ep.model, messages=[{"role": "user", "content": "x"}])
                await ep.end(0.5)
            return ep.group

    assert asyncio.run(main()) == "grp-5/async"
    assert len(stored_groups(shared_server)["grp-5/async"]) == 1


def test_group_keys_and_group_values_without_a_server():
    a, b = object(), object()
    task = Task(task_id="7")
    # one server, one key: each team its own group; different servers share the key
    assert group_keys({"wolves": a, "seer": a}, {"wolves": task, "seer": task}, None) == {"wolves": "7/wolves",
                                                                                         "seer": "7/seer"}
    assert group_keys({"s1": a, "s2": b}, {"s1": task, "s2": task}, "k") == {"s1": "k", "s2": "k"}
    own = {"wolves": Task(task_id="7-w"), "seer": Task(task_id="7-s")}  # already apart: left as they are
    assert group_keys({"wolves": a, "seer": a}, own, None) == {"wolves": None, "seer": None}
    assert Group.of(task, 4) == Group(task, 4, "7") and Group.of({"task_id": "8"}, 2, key="x").key == "x"
    with pytest.raises(ConfigError):
        Group.of(task, 0)
    with pytest.raises(ConfigError):
        Group.of(task, 2, key="")
    steps = iter([0, 0, 5])
    stream = schedule_groups([task, Task(task_id="9")], 4, held_out=[Task(task_id="h")], eval_every=5,
                             step=lambda: next(steps))
    got = [(g.key, g.n, g.eval) for g in (next(stream) for _ in range(5))]
    assert got == [("h", 1, True), ("7", 4, False), ("9", 4, False), ("h", 1, True), ("7", 4, False)]
    with pytest.raises(ConfigError, match="auto_sync"):
        SwarmClient("http://127.0.0.1:9").group(task)


def test_the_doc_block_on_groups_runs(shared_server, capsys):
    """docs/client.md's 'Groups and the loop' block, run after a preamble that makes `swarm`."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "client.md").read_text(encoding="utf-8")
    section = doc.split("\n### Groups and the loop\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"^```python\n(.*?)^```", section, re.M | re.S)
    with sync(shared_server) as swarm:
        exec(compile(block, "docs/client.md", "exec"), {"swarm": swarm, "__name__": "doc"})
        n = swarm.job.grpo_n
    out = capsys.readouterr().out
    assert f"{2 * n} episodes, 0 failed" in out and out.count("count-3 ") == n, out
