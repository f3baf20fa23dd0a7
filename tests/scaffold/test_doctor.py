"""`vibe-rl doctor` on the generated project, clean and with injected bugs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vibe_rl.scaffold.doctor import diagnose

REPO = Path(__file__).resolve().parents[2]
VIBE_RL = str(Path(sys.executable).parent / "vibe-rl")


@pytest.fixture
def project(tmp_path) -> Path:
    dst = tmp_path / "who_is_spy"
    shutil.copytree(REPO / "generated" / "who_is_spy", dst, ignore=shutil.ignore_patterns("__pycache__", ".*"))
    return dst


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def errors(project: Path) -> list:
    return [f for f in diagnose(project) if f.level == "error"]


def doctor(project: Path) -> subprocess.CompletedProcess:
    return subprocess.run([VIBE_RL, "doctor", str(project), "--json"], capture_output=True, text=True, timeout=120)


def test_generated_project_is_clean(project):
    done = doctor(project)
    assert done.returncode == 0, done.stdout
    report = json.loads(done.stdout)
    assert report["ok"] and report["findings"] == []


def test_empty_task_id_in_dataset(project):
    data = json.loads((project / "mock_game_dataset.json").read_text())
    data[2]["seed"] = ""
    (project / "mock_game_dataset.json").write_text(json.dumps(data, indent=1))
    (finding,) = errors(project)
    assert finding.file == "mock_game_dataset.json" and finding.line > 1 and "empty" in finding.message
    assert "unique non-empty" in finding.fix
    done = doctor(project)
    assert done.returncode == 1 and json.loads(done.stdout)["errors"] == 1


def test_empty_task_id_in_code(project):
    edit(project / "agent_roll.py", 'task_id=str(game["seed"])', 'task_id=""')
    line = next(n for n, text in enumerate((project / "agent_roll.py").read_text().splitlines(), 1)
                if 'task_id=""' in text)
    (finding,) = errors(project)
    assert (finding.file, finding.line) == ("agent_roll.py", line) and "empty task_id" in finding.message


def test_constant_task_id_in_code(project):
    edit(project / "agent_roll_adv.py", 'task_id=str(game["seed"])', 'task_id="spy"')
    (finding,) = errors(project)
    assert finding.file == "agent_roll_adv.py" and "same task_id" in finding.message


def test_duplicate_task_id(project):
    data = json.loads((project / "mock_game_dataset.json").read_text())
    data[9]["seed"] = data[4]["seed"]
    (project / "mock_game_dataset.json").write_text(json.dumps(data, indent=1))
    (finding,) = errors(project)
    assert "repeats task_id" in finding.message and "record 4" in finding.message


def test_spy_wired_to_the_civilians_model(project):
    edit(project / "agent_run.py", '"spy": "qwen-max"', '"spy": "server1"')
    (finding,) = errors(project)
    assert finding.file == "agent_run.py" and finding.line > 0
    assert "spy" in finding.message and "qwen-max" in finding.message
    assert finding.fix == 'set TEAM_MODELS["spy"] = "qwen-max"'


def test_adv_mix_up(project):
    edit(project / "agent_run_adv.py", '"spy": "server2"', '"spy": "server1"')
    (finding,) = errors(project)
    assert finding.file == "agent_run_adv.py" and "agent_roll_adv" in finding.message


def test_hard_coded_group_size_disagrees_with_config(project):
    edit(project / "agent_roll.py", "DISCARD_EPISODE_TIMEOUT = 600", "DISCARD_EPISODE_TIMEOUT = 600\nGRPO_N = 6")
    (finding,) = errors(project)
    assert finding.file == "agent_roll.py" and "config.yaml" in finding.message and "job.grpo_n" in finding.fix


def test_config_edit_is_a_warning(project):
    edit(project / "config.yaml", "batch_size: 16", "batch_size: 32")
    (finding,) = diagnose(project)
    assert finding.level == "warning" and finding.file == "config.yaml" and finding.line > 0


def test_a_learning_rate_too_large_for_the_model(project):
    edit(project / "config.yaml", "lr: 1.0e-06", "lr: 0.001")
    (finding,) = diagnose(project)
    assert finding.level == "warning" and "Qwen2.5-7B-Instruct (full fine-tune)" in finding.message
    assert finding.line > 0 and "1e-6 to 1e-5" in finding.fix
    edit(project / "config.yaml", "lr: 0.001", "lr: 5")
    (finding,) = errors(project)
    assert "train.lr = 5" in finding.message and finding.file == "config.yaml"


def test_chinese_syntax_and_untagged_calls(project):
    edit(project / "game_engine.py", "import random", "import random  # 随机")
    edit(project / "mock_dataset.py", "import json", "import json(")
    edit(project / "agent_run.py", "user=tag(player), ", "")
    found = {(f.file, f.message.split(":")[0]) for f in errors(project)}
    assert ("game_engine.py", "Chinese/CJK text in code") in found
    assert ("mock_dataset.py", "does not compile") in found
    assert ("agent_run.py", "chat call without user= tag") in found


def test_adv_servers_disagree_on_group_size(project):
    edit(project / "config_server2.yaml", "grpo_n: 4", "grpo_n: 6")
    (finding,) = errors(project)
    assert finding.file == "config_server2.yaml" and "agent_roll_adv" in finding.message and finding.line > 0


def test_doctor_says_which_engine_each_server_runs_and_why(project):
    edit(project / "config.yaml", "\nmodel:\n", "\nmodel:\n  engine: auto\n")  # the default torch is not written
    report = json.loads(doctor(project).stdout)
    first, second = report["engines"]
    assert first["config"] == "config.yaml" and first["engine"] == "torch"
    assert "could not be read" in first["reason"]  # the spec's model path is not on this machine
    assert second == {"server": "server2", "config": "config_server2.yaml", "engine": "torch",
                      "reason": "model.engine names it"}
    edit(project / "config.yaml", "Qwen2.5-7B-Instruct", "x")
    edit(project / "config.yaml", "path: /mnt/data_cpfs/model_cache/modelscope/hub/Qwen/Qwen/x", "path: tiny")
    text = subprocess.run([VIBE_RL, "doctor", str(project)], capture_output=True, text=True, timeout=120).stdout
    assert "engine: config.yaml (server1): torch, because model.engine is auto and Qwen2ForCausalLM is one of " \
           "the embedded paged engine's architectures" in text
