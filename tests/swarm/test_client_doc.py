"""docs/client.md stays true: its job table is the schema's, and its snippets, pasted into a fresh file,
train the tiny model on a real server to global step 3 with rewards that vary, leaving the checkpoint
that its export section names; the asyncio client's block trains it to global step 1, and its block of one
game on two servers trains both to step 1."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.swarm.conftest import Server
from vibe_rl.schema.reference import END, START, job_reference
from vibe_rl.swarm import SwarmClient

DOC = Path(__file__).resolve().parents[2] / "docs" / "client.md"


def client_snippets(title: str = "Write a client", level: str = "##") -> str:
    """The python blocks of the section `## <title>` (or `### <title>`, with `level`) up to the next heading of
    any level, joined into one script."""
    section = re.split(r"\n##+ ", DOC.read_text(encoding="utf-8").split(f"\n{level} {title}\n", 1)[1], maxsplit=1)[0]
    return "\n\n".join(re.findall(r"^```python\n(.*?)^```", section, re.M | re.S))


def test_the_job_reference_is_the_schema():
    text = DOC.read_text(encoding="utf-8")
    table = text.split(START, 1)[1].split(END, 1)[0].strip()
    assert table == job_reference(), "docs/client.md: run python -m vibe_rl.schema.reference docs/client.md"


def test_the_status_table_is_the_status_model():
    """Every field the server's status answers is described in docs/client.md, as EngineStatus describes it."""
    from vibe_rl.swarm.server.status import STATUS_END, STATUS_START, status_reference

    table = DOC.read_text(encoding="utf-8").split(STATUS_START, 1)[1].split(STATUS_END, 1)[0].strip()
    assert table == status_reference(), "docs/client.md: run python -m vibe_rl.swarm.server.status docs/client.md"
    assert "FINISHED" in table


def test_a_client_written_from_the_doc_trains_to_step_3(tmp_path, tiny_model_dir):
    script = tmp_path / "my_client.py"
    script.write_text(client_snippets())
    assert "swarm.episode(" in script.read_text() and "run_in_flight(" in script.read_text()
    server = Server(tmp_path / "exp").start()
    try:
        done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                              timeout=600, env={**os.environ, "VIBE_RL_SWARM_URL": server.url})
        assert done.returncode == 0, done.stderr[-3000:] + server.output()
        assert "step 3:" in done.stdout and ", 0 failed" in done.stdout, done.stdout
        with SwarmClient(server.url) as swarm:
            assert swarm.status().global_step == 3
            updates = [u.model_dump() for u in swarm.updates()]
        # the toy reward keeps varying: far from saturated, and every update has a group whose rewards differ
        # (a group whose rewards all agree has zero advantage and teaches nothing)
        assert all(0.0 < u["reward_mean"] < 0.9 and u["all_equal_groups"] < u["groups"] for u in updates), updates
        # the export section's checkpoint exists (save_freq: 1) and exports
        from vibe_rl.cli.export import export_checkpoint

        out = export_checkpoint(tmp_path / "exp" / "checkpoints" / "step_000003", tmp_path / "exported")
        assert (out / "config.json").is_file()
    finally:
        server.stop()


def test_the_asyncio_client_of_the_doc_trains_one_update(tmp_path, tiny_model_dir):
    script = tmp_path / "my_async_client.py"
    script.write_text(client_snippets("An asyncio client"))
    assert "AsyncSwarmClient(" in script.read_text() and "async with swarm.episode(" in script.read_text()
    server = Server(tmp_path / "exp").start()
    try:
        done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                              timeout=300, env={**os.environ, "VIBE_RL_SWARM_URL": server.url})
        assert done.returncode == 0, done.stderr[-3000:] + server.output()
        assert "8 episodes, mean reward" in done.stdout and "step 1: reward" in done.stdout, done.stdout
        with SwarmClient(server.url) as swarm:
            status = swarm.status()
            assert status.global_step == 1 and status.running_count == 0
    finally:
        server.stop()


def test_the_asyncio_game_on_two_servers_of_the_doc_is_stored_on_both(tmp_path, tiny_model_dir):
    """The block of `open_async_episodes`, run as a file against two servers: each stores its team's four
    episodes (one per game, the rewards of a game adding up to 1) and trains its model once."""
    import time

    from vibe_rl.swarm.observe.traces import TraceReader

    script = tmp_path / "two_servers.py"
    script.write_text(client_snippets("One game on several servers, from asyncio", level="###"))
    assert "async with open_async_episodes(" in script.read_text() and "await eps.end(" in script.read_text()
    servers: list[Server] = []
    try:
        for name in ("civilians", "spies"):
            servers.append(Server(tmp_path / name).start())
        done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                              timeout=300, env={**os.environ, "VIBE_RL_SWARM_URL": servers[0].url,
                                                "VIBE_RL_SWARM_URL_2": servers[1].url})
        assert done.returncode == 0, done.stderr[-3000:] + "".join(s.output() for s in servers)
        assert "4 games, the civilians won" in done.stdout, done.stdout
        rewards: list[float] = []
        for server in servers:
            episodes = TraceReader(server.exp_dir).episodes()
            assert [e["task_id"] for e in episodes] == ["0"] * 4, episodes
            rewards += [e["reward"] for e in episodes]
            with SwarmClient(server.url) as swarm:
                deadline = time.monotonic() + 180  # a guard against hanging, not a speed assertion
                while swarm.status().global_step < 1:
                    assert time.monotonic() < deadline, "no update within the guard" + server.output()
                    time.sleep(0.2)
        assert sum(rewards) == 4.0 and all(r in (0.0, 1.0) for r in rewards)  # one winning team per game
    finally:
        for server in servers:
            server.stop()


def test_the_plain_http_client_of_the_doc_trains_two_updates(tmp_path, tiny_model_dir):
    """The HTTP endpoints section's block (httpx and the openai SDK only), run as a file, with the token passed
    the way its comment says a client elsewhere would."""
    from vibe_rl.swarm.auth import client_token

    script = tmp_path / "plain_http_client.py"
    script.write_text(client_snippets("The HTTP endpoints"))
    assert "import vibe_rl" not in script.read_text() and "/episode/begin" in script.read_text()
    server = Server(tmp_path / "exp").start()
    try:
        done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                              timeout=300, env={**os.environ, "VIBE_RL_SWARM_URL": server.url,
                                                "VIBE_RL_SWARM_TOKEN": client_token(server.url)})
        assert done.returncode == 0, done.stderr[-3000:] + server.output()
        assert re.match(r"\[\(1, [\d.]+\), \(2, [\d.]+\)\]", done.stdout.strip()), done.stdout
    finally:
        server.stop()


def test_the_several_episodes_block_of_the_doc_plays_a_game(tmp_path, tiny_model_dir):
    """The 'Several episodes at once' block (a fragment: it needs `swarm` and a static model 'qwen-max'), run
    as a file after a preamble that makes them: one game opens two episodes, calls both models and ends both."""
    import json

    job = {"model": {"path": "tiny", "device": "cpu", "max_model_len": 512}, "rollout": {"max_tokens": 8},
           "train": {"batch_size": 2, "grpo_n": 4}, "static_models": [{"name": "qwen-max"}]}
    (tmp_path / "job.yaml").write_text(json.dumps(job))  # JSON is YAML; no URL: a frozen local copy serves it
    section = DOC.read_text(encoding="utf-8").split("\n### Several episodes at once\n", 1)[1].split("\n### ", 1)[0]
    block = re.findall(r"^```python\n(.*?)^```", section, re.M | re.S)
    assert len(block) == 1 and "open_episodes(" in block[0]
    preamble = ("import json, os\nfrom vibe_rl.swarm import SwarmClient\n"
                "swarm = SwarmClient(os.environ['VIBE_RL_SWARM_URL'])\n"
                f"swarm.auto_sync_train_config_and_start_engine(json.loads({json.dumps(job)!r}), verbose=False)\n")
    script = tmp_path / "two_teams.py"
    script.write_text(preamble + block[0] + "\nplay(7)\nprint('played', swarm.status().running_count)\n")
    server = Server(tmp_path / "exp", extra=["--config", str(tmp_path / "job.yaml")]).start()
    try:
        done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                              timeout=300, env={**os.environ, "VIBE_RL_SWARM_URL": server.url})
        assert done.returncode == 0, done.stderr[-3000:] + server.output()
        assert done.stdout.strip().endswith("played 0"), done.stdout
        from vibe_rl.swarm.observe.traces import TraceReader

        episodes = TraceReader(server.exp_dir).episodes()
        assert sorted(e["task_id"] for e in episodes) == ["7/seer", "7/wolves"]  # the group keys
        by_task = {e["task_id"]: (e["reward"], e["turns"], e["players"], e["models"]) for e in episodes}
        assert by_task == {"7/wolves": (1.0, 1, ["wolf:player_2"], ["tiny"]),
                           "7/seer": (0.0, 1, ["seer:player_5"], ["tiny"])}, by_task
    finally:
        server.stop()
