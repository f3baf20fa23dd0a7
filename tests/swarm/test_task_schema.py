"""What a client builds by hand: Task keeps every key it is given, WorkflowOutput refuses rewards that
are not finite floats with a message that says so (no OverflowError from deep inside)."""

from __future__ import annotations

import pydantic
import pytest

from vibe_rl.schema import Task, WorkflowOutput


def test_task_keys_other_than_its_fields_go_to_metadata():
    task = Task(task_id="7", main_query="describe", words=["apple", "pear"], seed=7, metadata={"round": 1})
    assert task.metadata == {"round": 1, "words": ["apple", "pear"], "seed": 7}
    assert Task.model_validate({"task_id": 3, "level": "hard"}).metadata == {"level": "hard"}
    assert Task.model_validate_json(task.model_dump_json()) == task  # the round trip keeps them


def test_a_key_given_twice_is_refused_with_the_fix():
    with pytest.raises(pydantic.ValidationError, match="'seed' is given both as a Task field and in metadata"):
        Task(task_id="1", seed=1, metadata={"seed": 2})


@pytest.mark.parametrize("reward", [10**400, -(10**400)])
def test_a_reward_beyond_float_is_a_validation_error(reward):
    with pytest.raises(pydantic.ValidationError, match="too large for a float"):
        WorkflowOutput(reward=reward)
    assert WorkflowOutput(reward=10**6).reward == 1e6


def test_a_workflow_output_built_by_hand_keeps_extra_keys_in_metadata():
    output = WorkflowOutput(reward=1, winner="p1", metadata={"rounds": 3})
    assert output.metadata == {"rounds": 3, "winner": "p1"}
    with pytest.raises(pydantic.ValidationError, match="'winner' is given both as a WorkflowOutput field"):
        WorkflowOutput(reward=1, winner="p1", metadata={"winner": "p2"})
