"""The episode schedule of the generated roll scripts: GRPO groups, held-out tasks, eval rounds."""

from __future__ import annotations

import itertools

import pytest

from vibe_rl.errors import ConfigError
from vibe_rl.swarm import Task, schedule, split_held_out

TASKS = [Task(task_id=str(i)) for i in range(5)]


def test_groups_without_eval():
    first = list(itertools.islice(schedule(TASKS[:2], grpo_n=3), 9))
    assert [(t.task_id, e) for t, e in first] == [("0", False)] * 3 + [("1", False)] * 3 + [("0", False)] * 3


def test_held_out_tasks_are_played_as_eval_at_start_and_every_k_updates():
    train, held = split_held_out(TASKS, 2)
    assert [t.task_id for t in held] == ["3", "4"] and len(train) == 3
    steps = iter([0, 0, 1, 2, 2, 3])  # the server's global step each time a training group starts
    got = list(itertools.islice(schedule(train, 1, held, eval_every=2, step=lambda: next(steps)), 10))
    evals = [i for i, (_, is_eval) in enumerate(got) if is_eval]
    assert evals == [0, 1, 5, 6]  # at step 0, then again once step reached 2
    assert not any(t in held for t, is_eval in got if not is_eval)  # held-out tasks are never trained on


def test_bad_splits_say_how_to_fix():
    with pytest.raises(ConfigError, match="--eval N"):
        split_held_out(TASKS, 5)
    with pytest.raises(ConfigError, match="step="):
        next(schedule(TASKS, 1, TASKS[:1], eval_every=1))
