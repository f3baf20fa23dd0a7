"""`vibe-rl doctor` on folders that are not (whole) projects (real CLI): every problem is a finding with exit 1,
never a traceback: a folder with no task_spec.json, files that are not UTF-8 (task_spec.json, config.yaml, the
dataset, a .py in a subfolder), a corrupted config.yaml and a roll script with a syntax error."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
VIBE_RL = str(Path(sys.executable).parent / "vibe-rl")
GBK = "# 谁是卧底\n".encode("gbk")


@pytest.fixture
def project(tmp_path) -> Path:
    dst = tmp_path / "who_is_spy"
    shutil.copytree(REPO / "generated" / "who_is_spy", dst, ignore=shutil.ignore_patterns("__pycache__", ".*"))
    return dst


def doctor(project: Path) -> tuple[int, list[dict], str]:
    res = subprocess.run([VIBE_RL, "doctor", str(project), "--json"], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in res.stderr, res.stderr
    return res.returncode, json.loads(res.stdout)["findings"], res.stderr


def test_a_folder_without_task_spec_is_an_error(project, tmp_path):
    (project / "task_spec.json").unlink()
    code, findings, _ = doctor(project)
    assert code == 1 and any(f["file"] == "task_spec.json" and "missing" in f["message"] for f in findings)
    code, findings, _ = doctor(tmp_path / "missing")
    assert code == 1 and "not a folder" in findings[0]["message"]


@pytest.mark.parametrize("file", ["task_spec.json", "config.yaml", "mock_game_dataset.json", "sub/helper.py"])
def test_a_file_that_is_not_utf8_is_named_once(project, file):
    (project / file).parent.mkdir(exist_ok=True)
    (project / file).write_bytes(GBK + b"\xff\xfe")
    code, findings, _ = doctor(project)
    named = [f for f in findings if f["file"] == file]
    assert code == 1 and len(named) == 1 and "not UTF-8" in named[0]["message"], findings
    assert "iconv" in named[0]["fix"]


@pytest.mark.parametrize("text,words", [
    ("train: [\n", "not valid YAML"),
    ("train:\n  lr: fast\n", "valid number"),
    ("train:\n  learning_rate: 1e-5\n", "did you mean train.lr"),
    ("- 1\n- 2\n", "YAML mapping"),
])
def test_a_corrupted_config_names_the_field(project, text, words):
    (project / "config.yaml").write_text(text)
    code, findings, _ = doctor(project)
    assert code == 1 and any(f["file"] == "config.yaml" and words in f["message"] for f in findings), findings


def test_a_roll_script_with_a_syntax_error(project):
    with (project / "agent_roll.py").open("a") as fh:
        fh.write("\ndef broken(:\n")
    code, findings, _ = doctor(project)
    assert code == 1 and any(f["file"] == "agent_roll.py" and "does not compile" in f["message"] for f in findings)
