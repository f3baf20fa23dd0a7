"""`vibe-rl doctor` on plans that cannot learn: each injected mistake is an error naming the file and the fix;
the committed generated/ projects pass."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from vibe_rl.scaffold.doctor import diagnose

REPO = Path(__file__).resolve().parents[2]


def copy(tmp_path: Path, family: str) -> Path:
    dst = tmp_path / family
    shutil.copytree(REPO / "generated" / family, dst, ignore=shutil.ignore_patterns("__pycache__", ".*"))
    return dst


def edit_spec(project: Path, change) -> None:
    path = project / "task_spec.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2))


def errors(project: Path) -> list:
    return [f for f in diagnose(project) if f.level == "error"]


@pytest.mark.parametrize("family", ["who_is_spy", "werewolves", "multi_model_translation"])
def test_committed_projects_pass(family):
    assert diagnose(REPO / "generated" / family) == []


def test_no_role_reaches_a_trainable_server(tmp_path):
    project = copy(tmp_path, "werewolves")

    def all_static(data):
        for team in data["teams"]:
            team["model"] = data["static_models"][0]["name"]
    edit_spec(project, all_static)
    found = [f for f in errors(project) if "no role reaches a trainable server" in f.message]
    assert len(found) == 1 and found[0].file == "task_spec.json" and "teams[].model" in found[0].fix


def test_rewarded_team_not_on_its_server(tmp_path):
    project = copy(tmp_path, "who_is_spy")
    edit_spec(project, lambda d: d["modes"][0]["rewarded"].update(server1="spies"))
    (finding,) = errors(project)
    assert finding.file == "task_spec.json" and "rewarded for team spies" in finding.message
    assert "qwen-max" in finding.message and "modes[agent_roll].rewarded" in finding.fix


def test_win_equals_loss_in_the_spec_and_in_code(tmp_path):
    project = copy(tmp_path, "who_is_spy")
    edit_spec(project, lambda d: d["reward"].update(loss=1.0))
    (finding,) = errors(project)
    assert finding.file == "task_spec.json" and "reward.win equals reward.loss" in finding.message
    run = project / "agent_run.py"
    run.write_text(run.read_text().replace("WIN, LOSS = 1.0, 0.0", "WIN, LOSS = 0.0, 0.0"))
    found = {(f.file, f.line > 0) for f in errors(project)}
    assert ("agent_run.py", True) in found


def test_win_equals_loss_with_the_shaped_reward_is_a_warning(tmp_path):
    """The shaped reward's dense terms still give a signal: equal outcome rewards are worth a look, not an error."""
    project = copy(tmp_path, "who_is_spy")
    edit_spec(project, lambda d: (d["reward"].update(win=0.0, loss=0.0), d["game"].update(shaped_reward=True)))
    assert errors(project) == []
    (warning,) = [f for f in diagnose(project) if "reward.win equals reward.loss" in f.message]
    assert warning.level == "warning" and "shaped reward" in warning.message


def test_static_model_missing_from_the_config(tmp_path):
    project = copy(tmp_path, "who_is_spy")
    config = project / "config.yaml"
    text = config.read_text()
    config.write_text(text[:text.index("static_models:")] + "static_models: []\n")
    (finding,) = errors(project)
    assert finding.file == "config.yaml" and "qwen-max" in finding.message and "static_models" in finding.fix


def test_static_model_with_a_key_but_no_url(tmp_path):
    project = copy(tmp_path, "who_is_spy")
    config = project / "config.yaml"
    lines = [line for line in config.read_text().splitlines() if "base_url:" not in line]
    config.write_text("\n".join(lines) + "\n")
    (finding,) = errors(project)
    assert finding.file == "config.yaml" and "DASHSCOPE_API_KEY" in finding.message and "base_url" in finding.fix


def test_server_gpus_differ_from_the_run_plan(tmp_path):
    project = copy(tmp_path, "who_is_spy")
    edit_spec(project, lambda d: d["servers"][1].update(gpus=2))
    found = errors(project)
    assert any(f.file == "task_spec.json" and "server2" in f.message and "run plan" in f.message for f in found)
    assert any(f.file == "config_server2.yaml" and f.line == 1 and "header says 4 GPUs" in f.message for f in found)


def test_mode_needs_more_gpus_than_the_node(tmp_path):
    project = copy(tmp_path, "who_is_spy")
    edit_spec(project, lambda d: d.update(gpus=4))
    (finding,) = errors(project)
    assert "agent_roll_adv needs 8 GPUs" in finding.message and finding.file == "task_spec.json"


def test_mode_without_a_script(tmp_path):
    project = copy(tmp_path, "who_is_spy")
    (project / "agent_roll_adv.py").unlink()
    (finding,) = errors(project)
    assert finding.file == "agent_roll_adv.py" and "agent_roll_adv" in finding.message and "re-render" in finding.fix


def test_unparsed_clauses_are_warnings(tmp_path):
    project = copy(tmp_path, "werewolves")
    edit_spec(project, lambda d: d.update(unparsed=["Use a KL coefficient of 0.05"]))
    (finding,) = diagnose(project)
    assert finding.level == "warning" and finding.file == "task_spec.json"
    assert "KL coefficient" in finding.message and "--plan" in finding.fix
