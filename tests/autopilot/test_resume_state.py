"""What a server starts from (resume, stale episodes, --fresh), the run state `vibe-rl status` reads, and the
learning signals the watcher flags: real SQLite stores and files, no processes beyond the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from vibe_rl.autopilot import resume, signals
from vibe_rl.autopilot.state import RunState, ServerProgress
from vibe_rl.rl.samples import Turn
from vibe_rl.swarm.server.pool import CompletedEpisode
from vibe_rl.swarm.server.store import Store

VIBE_RL = str(Path(sys.executable).parent / "vibe-rl")


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "game"
    root.mkdir()
    (root / "rules.py").write_text("MAX_ROUNDS = 6\n")
    return root


def _record(root: Path, step: int, episodes: int, answer: str = "no move") -> None:
    """A previous run: a checkpoint at `step` and `episodes` completed, untrained episodes."""
    exp = root / "experiments" / "server1"
    ckpt = exp / "checkpoints" / f"step_{step:06d}"
    ckpt.mkdir(parents=True)
    (exp / "checkpoints" / "latest.json").write_text(json.dumps({"step": step, "dir": ckpt.name}))
    store = Store(exp / "swarm.sqlite")
    for i in range(episodes):
        turn = Turn([1, 2], [3], [-0.1], [{"role": "user", "content": "move?"}], response_text=answer,
                          player="p", model="server1", ts=float(i))
        store.save_episode(CompletedEpisode(f"e{i}", f"t{i}", 0.0, [turn], float(i)), {}, {})
    store.close()


def _status(root: Path) -> dict:
    store = Store(root / "experiments" / "server1" / "swarm.sqlite")
    try:
        return store.counts()
    finally:
        store.close()


def test_same_files_resume_and_retrain_changed_files_set_episodes_aside(tmp_path):
    root = _project(tmp_path)
    before = resume.project_fingerprint(root)
    _record(root, step=20, episodes=3)
    (root / "experiments" / "server1" / resume.FINGERPRINT_FILE).write_text(json.dumps({"fingerprint": before}))
    (root / "logs").mkdir()
    (root / "logs" / "x.log").write_text("logs do not count")
    same = resume.prepare(root, "server1", resume.project_fingerprint(root))
    assert (same.step, same.retrained, same.set_aside) == (20, 3, 0)
    assert any("resuming the checkpoint at global step 20" in n for n in same.notes)
    assert _status(root) == {"completed": 3}

    (root / "rules.py").write_text("MAX_ROUNDS = 5\n")  # a rule changed
    changed = resume.prepare(root, "server1", resume.project_fingerprint(root))
    assert (changed.step, changed.retrained, changed.set_aside) == (20, 0, 3)
    assert any("set aside 3 untrained episodes" in n and "files changed" in n for n in changed.notes)
    assert _status(root) == {"stale": 3}  # kept, never trained


def test_fresh_moves_the_experiment_aside_and_starts_at_zero(tmp_path):
    root = _project(tmp_path)
    _record(root, step=4, episodes=2)
    point = resume.prepare(root, "server1", resume.project_fingerprint(root), fresh=True)
    assert point.step == 0 and point.checkpoint is None and point.retrained == 0
    kept = list((root / "experiments" / ".previous").iterdir())
    assert len(kept) == 1 and (kept[0] / "checkpoints" / "latest.json").is_file()  # nothing deleted
    assert any("--fresh" in n for n in point.notes)


def test_signals_first_nonzero_gradient_streak_and_unparseable_answers(tmp_path):
    root = _project(tmp_path)
    _record(root, step=0, episodes=10)
    store = Store(root / "experiments" / "server1" / "swarm.sqlite")
    for step, equal in ((1, 2), (2, 2), (3, 2), (4, 2)):
        store.record_update(step, {"groups": 2, "all_equal_groups": equal, "episodes": 1})
    store.close()
    assert signals.first_signal(signals.updates_since(root, "server1", 0)) is None

    class Spec:
        class constraints:
            use_openai_sdk_tools = True

    statuses = {"server1": {"pool": {"completed_episodes": 1, "aborted_episodes": 40}}}
    notes = signals.health_notes(root, statuses, {"server1": ServerProgress("u", "s", start_step=0)}, Spec)
    assert any("40 episodes were aborted" in n for n in notes)
    assert any("10 of the latest 10 model answers hold no parseable tool call" in n for n in notes)
    assert any("last 4 updates had zero gradient" in n for n in notes)
    store = Store(root / "experiments" / "server1" / "swarm.sqlite")
    store.record_update(5, {"groups": 2, "all_equal_groups": 1})
    store.close()
    assert signals.first_signal(signals.updates_since(root, "server1", 0)) == 5
    assert signals.first_signal(signals.updates_since(root, "server1", 5)) is None  # counted from the start step
    store = Store(root / "experiments" / "server1" / "swarm.sqlite")
    for step in (6, 7, 8):  # rewards now differ within groups: unparseable answers are no longer the story
        store.record_update(step, {"groups": 2, "all_equal_groups": 0})
    store.close()
    notes = signals.health_notes(root, statuses, {"server1": ServerProgress("u", "s", start_step=0)}, Spec)
    assert not any("parseable tool call" in n for n in notes)


def test_status_reports_a_finished_a_running_and_a_dead_run(tmp_path):
    root = _project(tmp_path)
    res = subprocess.run([VIBE_RL, "status", str(root)], capture_output=True, text=True)
    assert res.returncode == 2 and "No `vibe-rl run` has been started" in res.stderr

    state = RunState(str(root), os.getpid(), "agent_roll", "steps:2", phase="training")
    state.servers["server1"] = ServerProgress("http://127.0.0.1:9", "g-1234-swarm-server", start_step=20,
                                              target_step=22, step=21, episodes=5)
    state.save(root)
    res = subprocess.run([VIBE_RL, "status", str(root), "--wait", "1"], capture_output=True, text=True)
    assert res.returncode == 3, res.stdout + res.stderr  # this test process is alive: still running
    assert "server1 step 21 (this run: 1 of 2 update(s), resumed at 20" in res.stdout

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    state.pid = dead.pid
    state.save(root)
    res = subprocess.run([VIBE_RL, "status", str(root)], capture_output=True, text=True)
    assert res.returncode == 1 and "ended without an outcome" in res.stdout
