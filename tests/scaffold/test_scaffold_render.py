"""Template discovery, jinja2 rendering, `vibe-rl new`, and the committed generated/who_is_spy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vibe_rl.errors import ConfigError, TemplateError
from vibe_rl.planner.offline import OfflinePlanner
from vibe_rl.scaffold import list_families, load_family, render_project
from vibe_rl.schema import TaskSpec, TrainJob

REPO = Path(__file__).resolve().parents[2]
SEED = REPO / "templates" / "who_is_spy" / "examples" / "seed_prompt.zh.md"
VIBE_RL = str(Path(sys.executable).parent / "vibe-rl")


def new(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([VIBE_RL, "new", *args], capture_output=True, text=True, cwd=cwd, timeout=120, env=env)


def test_generated_who_is_spy_matches_the_templates(tmp_path):
    out = tmp_path / "who_is_spy"
    done = new("--spec-file", str(SEED), "--planner", "offline", "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    committed = REPO / "generated" / "who_is_spy"
    names = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    kept = sorted(p.relative_to(committed).as_posix() for p in committed.rglob("*")
                  if p.is_file() and not any(part.startswith((".", "__pycache__")) for part in p.relative_to(committed).parts))
    assert names == kept
    for name in names:
        assert (out / name).read_text() == (committed / name).read_text(), (
            f"generated/who_is_spy/{name} drifted from the templates: regenerate it with "
            f"vibe-rl new --spec-file {SEED.relative_to(REPO)} --planner offline --force")


def test_project_files_and_configs(tmp_path):
    spec = OfflinePlanner().plan(SEED.read_text(encoding="utf-8"))
    render_project(spec, tmp_path / "p")
    p = tmp_path / "p"
    for name in ("mock_dataset.py", "mock_game_dataset.json", "game_engine.py", "agent_run.py", "agent_roll.py",
                 "agent_run_adv.py", "agent_roll_adv.py", "readme.md", "config.yaml", "config_server2.yaml",
                 "task_spec.json", "test_game_engine.py"):
        assert (p / name).is_file(), name
    assert TaskSpec.load(p) == spec
    job1, job2 = TrainJob.from_yaml(p / "config.yaml"), TrainJob.from_yaml(p / "config_server2.yaml")
    assert (job1.batch_size, job1.grpo_n, job2.batch_size) == (16, 4, 16)
    assert [m.name for m in job1.static_models] == ["qwen-max"] and job2.static_models == []
    assert job1.static_models[0].api_key_env == "DASHSCOPE_API_KEY"
    assert job1.model.path == spec.servers[0].model_path


@pytest.mark.parametrize("family, text", [
    ("who_is_spy", "Who is spy, 6 players, 1 spy, /models/q3, 1 GPU, batch size 4"),
    ("werewolves", "Werewolves, 9 players, the werewolves and the seer train /models/q3 on 1 GPU, batch size 4"),
    ("multi_model_translation", "Translation workflow: agents 1 and 3 on server 1 (/models/a, 1 GPU), agent 2 on "
                                "server 2 (/models/b, 1 GPU), batch size 4"),
    ("turn_based", "Liar's dice for 3 players, train /models/q3 on 1 GPU, batch size 4"),
])
def test_readme_says_1_gpu_not_1_gpus(family, text, tmp_path):
    """Every family's readme wrote '(port 10086, 1 GPUs)' for a one-GPU server."""
    spec = OfflinePlanner().plan(text, family=family)
    assert spec.family == family and 1 in {s.gpus for s in spec.servers}
    render_project(spec, tmp_path / "p")
    readme = (tmp_path / "p" / "readme.md").read_text()
    assert "1 GPUs" not in readme and "1 GPU" in readme


def test_refuses_non_empty_folder_without_force(tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "mine.txt").write_text("keep me")
    done = new("who is spy", "--planner", "offline", "--out", "p", cwd=tmp_path)
    assert done.returncode != 0 and "--force" in done.stderr
    assert sorted(x.name for x in (tmp_path / "p").iterdir()) == ["mine.txt"]
    done = new("who is spy", "--planner", "offline", "--out", "p", "--force", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "p" / "agent_roll.py").is_file() and (tmp_path / "p" / "mine.txt").is_file()


def test_default_out_and_dry_run(tmp_path):
    done = new("who is spy, batch size 8", "--planner", "offline", "--dry-run", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["training"]["batch_size"] == 8
    assert not any(tmp_path.iterdir())
    done = new("who is spy", "--planner", "offline", "--name", "my_spy", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert TaskSpec.load(tmp_path / "generated" / "my_spy").name == "my_spy"


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16"])
def test_spec_files_with_a_bom_are_read_and_other_encodings_named(tmp_path, encoding):
    (tmp_path / "spec.md").write_text("谁是卧底，5 个玩家，batch 8", encoding=encoding)
    done = new("--spec-file", "spec.md", "--planner", "offline", "--dry-run", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert (plan["game"]["num_players"], plan["training"]["batch_size"]) == (5, 8)
    (tmp_path / "gbk.md").write_text("谁是卧底，5 个玩家", encoding="gbk")
    done = new("--spec-file", "gbk.md", "--planner", "offline", "--dry-run", cwd=tmp_path)
    assert done.returncode == 2 and "is not UTF-8 text" in done.stderr and "Traceback" not in done.stderr


def test_unsupported_spec_writes_nothing(tmp_path):
    done = new("train a Diplomacy negotiation agent", "--planner", "offline", cwd=tmp_path)
    assert done.returncode != 0 and "does not know the game" in done.stderr, done.stderr
    assert "Families it knows" in done.stderr and "who_is_spy" in done.stderr and "--family turn_based" in done.stderr
    assert not any(tmp_path.iterdir())


def _family(root: Path, name: str, files: dict[str, str]) -> None:
    (root / name / "project").mkdir(parents=True)
    (root / name / "manifest.yaml").write_text(
        f"name: {name}\ndescription: test family\nshort_name: tf\nkeywords: {{en: [tic tac toe], zh: [井字棋]}}\n"
        "parameters:\n  size: {default: 3, min: 3, max: 9, description: board size}\n", encoding="utf-8")
    for rel, text in files.items():
        (root / name / "project" / rel).write_text(text, encoding="utf-8")


def _spec(family: str, **game) -> TaskSpec:
    return TaskSpec(family=family, name="t", short_name="t", game=game,
                    teams=[{"name": "x", "roles": ["x"], "model": "s1"}],
                    servers=[{"name": "s1", "port": 10086, "model_path": "tiny", "config": "config.yaml",
                              "url_env": "U"}],
                    modes=[{"name": "agent_roll", "script": "agent_roll.py", "run_file": "agent_run.py",
                            "servers": ["s1"]}])


def test_a_family_is_a_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("VIBE_RL_TEMPLATES", str(tmp_path))
    _family(tmp_path, "tic_tac_toe", {"board.py.j2": "SIZE = {{ game.size }}\n", "notes.txt": "{{ kept as is }}\n"})
    assert [m.name for m in list_families()] == ["tic_tac_toe"]
    assert "井字棋" in load_family("tic_tac_toe").all_keywords()
    render_project(_spec("tic_tac_toe", size=4), tmp_path / "out")
    assert (tmp_path / "out" / "board.py").read_text() == "SIZE = 4\n"
    assert (tmp_path / "out" / "notes.txt").read_text() == "{{ kept as is }}\n"
    assert TrainJob.from_yaml(tmp_path / "out" / "config.yaml").model.path == "tiny"
    with pytest.raises(TemplateError, match="no parameters"):
        render_project(_spec("tic_tac_toe", colour="red"), tmp_path / "out2")
    with pytest.raises(TemplateError, match="No template family"):
        render_project(_spec("go"), tmp_path / "out3")
    with pytest.raises(TemplateError, match=r"size = 12 is above its maximum 9.*game\.size in task_spec\.json"):
        render_project(_spec("tic_tac_toe", size=12), tmp_path / "out4")
    with pytest.raises(TemplateError, match="size = 'big' is not a number"):
        render_project(_spec("tic_tac_toe", size="big"), tmp_path / "out5")
    assert not (tmp_path / "out4").exists()


def test_strict_undefined(tmp_path, monkeypatch):
    monkeypatch.setenv("VIBE_RL_TEMPLATES", str(tmp_path))
    _family(tmp_path, "broken", {"x.py.j2": "A = {{ game.missing }}\n"})
    with pytest.raises(TemplateError, match="missing"):
        render_project(_spec("broken"), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_spec_validation_and_load_errors(tmp_path):
    data = _spec("x").model_dump()
    data["teams"][0]["model"] = "nowhere"
    with pytest.raises(ValueError, match="nowhere"):
        TaskSpec.model_validate(data)
    with pytest.raises(ConfigError, match="vibe-rl new"):
        TaskSpec.load(tmp_path)
