"""Task loaders: JSON Lines, JSON lists and Hugging Face datasets saved on disk, with column mappings."""

from __future__ import annotations

import json

import pytest

from vibe_rl.errors import ConfigError
from vibe_rl.swarm import TaskColumns, load_tasks

ROWS = [{"id": 7, "question": "2+2?", "answer": "4"}, {"id": 8, "question": "3+3?", "answer": "6"}]


def test_jsonl_with_a_column_mapping(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n\n")
    tasks = load_tasks(path, TaskColumns(task_id="id", main_query="question"))
    assert [(t.task_id, t.main_query) for t in tasks] == [("7", "2+2?"), ("8", "3+3?")]
    assert tasks[0].metadata == ROWS[0]  # every column, for the game code
    only = load_tasks(path, TaskColumns(task_id=None, main_query="question", metadata=["answer"]), limit=1)
    assert [(t.task_id, t.metadata) for t in only] == [("0", {"answer": "4"})]


def test_json_list_and_errors_that_name_the_fix(tmp_path):
    path = tmp_path / "train.json"
    path.write_text(json.dumps({"data": ROWS}))
    assert [t.task_id for t in load_tasks(path, TaskColumns(task_id="id"))] == ["7", "8"]
    with pytest.raises(ConfigError, match=r"no column 'task_id'.*TaskColumns"):
        load_tasks(path)
    with pytest.raises(ConfigError, match="no column 'prompt'"):
        load_tasks(path, TaskColumns(task_id="id", main_query="prompt"))
    dup = tmp_path / "dup.jsonl"
    dup.write_text(json.dumps(ROWS[0]) + "\n" + json.dumps(ROWS[0]) + "\n")
    with pytest.raises(ConfigError, match="rows 0 and 1"):
        load_tasks(dup, TaskColumns(task_id="id"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(ROWS[0]) + "\n{oops\n")
    with pytest.raises(ConfigError, match="bad.jsonl:2"):
        load_tasks(bad, TaskColumns(task_id="id"))


def test_hugging_face_dataset_saved_on_disk(tmp_path):
    import datasets  # the data extra; scripts/setup.sh installs it
    single = tmp_path / "single"
    datasets.Dataset.from_list(ROWS).save_to_disk(str(single))
    assert [t.main_query for t in load_tasks(single, TaskColumns(task_id="id", main_query="question"))] == \
        ["2+2?", "3+3?"]
    both = tmp_path / "dict"
    datasets.DatasetDict({"train": datasets.Dataset.from_list(ROWS),
                          "test": datasets.Dataset.from_list(ROWS[:1])}).save_to_disk(str(both))
    test = load_tasks(both, TaskColumns(task_id="id", main_query="question"), split="test")
    assert [t.task_id for t in test] == ["7"]
    with pytest.raises(ConfigError, match="pass split"):
        load_tasks(both, TaskColumns(task_id="id"))
