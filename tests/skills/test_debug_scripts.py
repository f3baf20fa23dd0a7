"""The debug-swarm-training and write-swarm-client helper scripts against a real swarm server
(tiny model, loopback), driven by the official openai SDK: they must spot the reference tutorial's
two bugs (one task_id for every episode; a spy on the civilians' model) and see a real update."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

from skillpack import SKILLS_DIR, free_port

DEBUG = SKILLS_DIR / "debug-swarm-training" / "scripts"
CHECK_TASKS = SKILLS_DIR / "write-swarm-client" / "scripts" / "check_tasks.py"


def _script(path: Path, *args: str) -> subprocess.CompletedProcess:
    # -I -S: the scripts must work with the standard library alone, as in any project venv
    return subprocess.run([sys.executable, "-I", "-S", str(path), *args], capture_output=True, text=True, timeout=300)


def _play(swarm, task, reward: float, spy_model: str | None) -> None:
    """One short episode: a civilian on the trainable model, a spy on `spy_model` (None: the trainable one)."""
    from openai import OpenAI

    from vibe_rl.swarm import WorkflowOutput

    episode_uuid, creds = swarm.begin_episode(discard_episode_timeout=300)
    client = OpenAI(base_url=creds.base_url, api_key=creds.api_key)
    messages = [{"role": "user", "content": "Describe your word."}]
    client.chat.completions.create(model=creds.model, messages=messages, max_tokens=3, user="civilian:player_1")
    client.chat.completions.create(model=spy_model or creds.model, messages=messages, max_tokens=3,
                                   user="spy:player_2")
    swarm.end_episode(task, episode_uuid, WorkflowOutput(reward=reward))


def test_scripts_diagnose_and_confirm_on_a_real_server(server):
    from vibe_rl.schema import RolloutConfig, StaticModel, TrainConfig, TrainJob
    from vibe_rl.swarm import SwarmClient, Task

    job = TrainJob(train=TrainConfig(batch_size=2, grpo_n=2, lr=1e-3), rollout=RolloutConfig(max_tokens=3),
                   static_models=[StaticModel(name="opponent")])
    swarm = SwarmClient(server)
    swarm.auto_sync_train_config_and_start_engine(job)

    # Bug 1: every episode ends with the same task_id -> one group, no update.
    same = Task(task_id="7", main_query="apple / pear")
    for i in range(8):
        _play(swarm, same, float(i % 2), spy_model="opponent")
    watch = _script(DEBUG / "watch_status.py", "--url", server, "--once")
    assert watch.returncode == 1, watch.stdout + watch.stderr
    assert "task '7' holds 8 episodes" in watch.stdout

    # Bug 2: one spy plays on the trainable model instead of the opponent.
    _play(swarm, Task(task_id="8"), 1.0, spy_model=None)
    audit = _script(DEBUG / "audit_traces.py", "--url", server, "--expect", "civilian=@trainable",
                    "--expect", "spy=opponent")
    assert audit.returncode == 1, audit.stdout + audit.stderr
    assert "role 'spy' should reach 'opponent'" in audit.stdout and "spy:player_2" in audit.stdout
    fine = _script(DEBUG / "audit_traces.py", "--url", server, "--expect", "civilian=@trainable")
    assert fine.returncode == 0, fine.stdout

    # With distinct task ids the batch fills and the server really updates the weights.
    for task_id in ("8", "9", "10"):
        for reward in (0.0, 1.0):
            _play(swarm, Task(task_id=task_id), reward, spy_model="opponent")
    deadline = time.monotonic() + 600
    while swarm.get_engine_status()["global_step"] < 1 and time.monotonic() < deadline:
        time.sleep(1)
    done = _script(DEBUG / "watch_status.py", "--url", server, "--until-step", "1", "--max-wait", "5")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reached global_step" in done.stdout


def test_check_tasks_on_the_generated_dataset_and_a_broken_one(tmp_path):
    generated = Path(__file__).resolve().parents[2] / "generated" / "who_is_spy" / "mock_game_dataset.json"
    ok = _script(CHECK_TASKS, str(generated), "--batch-size", "16")
    assert ok.returncode == 0, ok.stdout
    rows = json.loads(generated.read_text())
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps([{**row, "seed": ""} for row in rows[5:8]] + rows[:2] + rows[:2]))
    bad = _script(CHECK_TASKS, str(broken))
    assert bad.returncode == 1
    assert "3 rows have an empty id" in bad.stdout and "ids are repeated" in bad.stdout


def test_watch_status_gives_up_when_no_server_answers():
    port = free_port()
    result = _script(DEBUG / "watch_status.py", "--url", f"http://127.0.0.1:{port}", "--once")
    assert result.returncode == 2 and "no answer" in result.stdout


def _monitoring_table() -> dict[str, list[str]]:
    """monitoring.md's status table: key -> the code spans of its meaning."""
    text = (DEBUG.parent / "references" / "monitoring.md").read_text(encoding="utf-8")
    rows = {}
    for line in text.split("## The status endpoint", 1)[1].split("\n## ", 1)[0].splitlines():
        if line.startswith("| `"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            for key in re.findall(r"`([^`]+)`", cells[0]):
                rows[key] = re.findall(r"`([^`]+)`", cells[1])
    return rows


def test_monitoring_md_names_the_real_status_and_traces_fields(server):
    """Every status key, pool/task/episode/update field, state and traces field that monitoring.md lists is in
    what a real server answers (with a finished update, a pooled task and a running episode)."""
    from vibe_rl.schema import RolloutConfig, TrainConfig, TrainJob
    from vibe_rl.swarm import SwarmClient, Task
    from vibe_rl.swarm.server import serving

    swarm = SwarmClient(server)
    swarm.auto_sync_train_config_and_start_engine(
        TrainJob(train=TrainConfig(batch_size=2, grpo_n=2, lr=1e-3), rollout=RolloutConfig(max_tokens=3)))
    for task_id in ("1", "2"):
        for reward in (0.0, 1.0):
            _play(swarm, Task(task_id=task_id), reward, spy_model="opponent")
    deadline = time.monotonic() + 600
    while swarm.get_engine_status()["global_step"] < 1 and time.monotonic() < deadline:
        time.sleep(1)
    _play(swarm, Task(task_id="3"), 1.0, spy_model="opponent")  # a task in the pool after the update
    open_uuid, _ = swarm.begin_episode(discard_episode_timeout=300)  # a running episode
    try:
        status = swarm.get_engine_status()
        calls = swarm.get_traces()["calls"]
    finally:
        swarm.abort_episode(open_uuid)
    assert status["global_step"] >= 1 and status["tasks"] and status["running_episodes"], status

    rows = _monitoring_table()
    assert len(rows) >= 10, rows
    assert set(rows) <= set(status), f"monitoring.md names status keys the server lacks: {set(rows) - set(status)}"
    fields = {"pool": status["pool"], "running_episodes": status["running_episodes"][0],
              "tasks": status["tasks"][0], "last_update": status["last_update"]}
    for key, answer in fields.items():
        named = {s for s in rows[key] if re.fullmatch(r"[a-z_]+", s)}
        assert named, f"no fields found for {key}"
        assert named <= set(answer), f"monitoring.md: {key} has no {sorted(named - set(answer))}"
    states = set(serving.STATES)
    named_states = {s for s in rows["state"] if re.fullmatch(r"[A-Z_]+", s)}
    assert named_states == states, f"monitoring.md's states {named_states} != the server's {states}"

    text = (DEBUG.parent / "references" / "monitoring.md").read_text(encoding="utf-8")
    shown = re.search(r'\{"calls": \[\{(.*?)\}\]\}', text).group(1)
    assert calls and set(re.findall(r'"(\w+)"', shown)) == set(calls[0]), calls[0]
