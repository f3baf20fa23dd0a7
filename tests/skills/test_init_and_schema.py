"""`vibe-rl init` writes a valid hand-written project, `vibe-rl schema taskspec` publishes task_spec.json's
schema, and `vibe-rl doctor` validates a hand-written project against it (real CLI, real files)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from vibe_rl.schema.spec import TaskSpec

VIBE_RL = str(Path(sys.executable).parent / "vibe-rl")


def _cli(*args, cwd=None):
    return subprocess.run([VIBE_RL, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_schema_taskspec_is_the_pydantic_schema_with_descriptions(tmp_path):
    res = _cli("schema", "taskspec")
    assert res.returncode == 0, res.stderr
    schema = json.loads(res.stdout)
    assert schema == TaskSpec.model_json_schema()
    assert {"family", "servers", "modes", "teams"} <= set(schema["properties"])
    assert all(p.get("description") for p in schema["properties"].values())
    assert _cli("schema", "taskspec", "--out", str(tmp_path / "s.json")).returncode == 0
    assert json.loads((tmp_path / "s.json").read_text()) == schema


def test_init_writes_a_project_that_doctor_passes_and_whose_rules_test_passes(tmp_path):
    res = _cli("init", "race_game", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    proj = tmp_path / "race_game"
    spec = TaskSpec.load(proj)
    assert spec.family == "custom" and spec.name == "race_game" and spec.roles == ["seat"]
    assert spec.mode().script == "agent_roll.py" and (proj / spec.servers[0].config).is_file()
    doc = _cli("doctor", str(proj))
    assert doc.returncode == 0 and "0 error(s), 0 warning(s)" in doc.stdout, doc.stdout + doc.stderr
    rules = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_game.py"],
                           cwd=proj, capture_output=True, text=True, timeout=120)
    assert rules.returncode == 0, rules.stdout
    again = _cli("init", str(proj))
    assert again.returncode == 2 and "is not empty" in again.stderr  # never overwrites without --force


def test_doctor_names_a_schema_error_and_a_family_without_template(tmp_path):
    assert _cli("init", "g", cwd=tmp_path).returncode == 0
    path = tmp_path / "g" / "task_spec.json"
    data = json.loads(path.read_text())
    data["family"] = "liars_dice"
    path.write_text(json.dumps(data))
    doc = _cli("doctor", str(tmp_path / "g"))
    assert "family 'liars_dice' has no template" in doc.stdout and "write family 'custom'" in doc.stdout
    data["servers"][0]["port"] = "not a port"
    path.write_text(json.dumps(data))
    doc = _cli("doctor", str(tmp_path / "g"))
    assert doc.returncode != 0 and "error: task_spec.json: servers.0.port" in doc.stdout
    assert "vibe-rl schema taskspec" in doc.stdout


def test_the_files_hand_written_game_md_lists_are_what_init_writes(tmp_path):
    from skillpack import SKILLS_DIR

    page = (SKILLS_DIR / "write-swarm-client" / "references" / "hand-written-game.md").read_text(encoding="utf-8")
    listed = re.search(r"^vibe-rl init my_game\s+#\s*(.+)$", page, re.M).group(1)
    names = [n.strip() for n in listed.split(",")]
    table = {m for m in re.findall(r"^\| `([\w.]+)` \|", page, re.M)}
    assert _cli("init", "my_game", cwd=tmp_path).returncode == 0
    written = {p.name for p in (tmp_path / "my_game").iterdir()}
    assert len(names) >= 5 and set(names) <= written, f"listed {names}, written {sorted(written)}"
    assert table and table <= written, f"the file table names {sorted(table - written)}, not written by init"
