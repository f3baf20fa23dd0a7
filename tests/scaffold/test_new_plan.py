"""`vibe-rl new`: what the planner did not understand is printed (yellow) before anything is written, and
`--plan task_spec.json` renders an edited plan, validated like a planner's answer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from vibe_rl.cli import get_app
from vibe_rl.schema import TaskSpec

VIBE_RL = str(Path(sys.executable).parent / "vibe-rl")
SPEC = "who is spy with 6 players, batch size 8. Use a KL coefficient of 0.05 for the reference model."


def new(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([VIBE_RL, "new", *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_not_understood_is_printed_before_writing(tmp_path):
    done = new(SPEC, "--planner", "offline", "--out", "p", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    line = "not understood: 'Use a KL coefficient of 0.05 for the reference model'"
    assert line in done.stdout and done.stdout.index(line) < done.stdout.index("wrote ")
    assert TaskSpec.load(tmp_path / "p").unparsed == ["Use a KL coefficient of 0.05 for the reference model"]
    assert "note: No grpo_n given: using 4." in done.stdout


def test_not_understood_is_yellow_and_off_stdout_with_json():
    result = CliRunner().invoke(get_app(), ["new", SPEC, "--planner", "offline", "--dry-run"], color=True)
    assert result.exit_code == 0, result.output
    assert "\x1b[33mnot understood: 'Use a KL coefficient" in result.output
    done = subprocess.run([VIBE_RL, "new", SPEC, "--planner", "offline", "--dry-run", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert json.loads(done.stdout)["unparsed"] and "not understood" in done.stderr


def test_plan_round_trip(tmp_path):
    done = new("who is spy, batch size 8", "--planner", "offline", "--dry-run", "--json", cwd=tmp_path)
    plan = json.loads(done.stdout)
    plan["training"]["grpo_n"] = 6
    plan["modes"] = [m for m in plan["modes"] if m["name"] == "agent_roll_adv"]
    plan["teams"][1]["model"] = "server2"
    plan["static_models"], plan["servers"][0]["static_models"] = [], []
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    done = new("--plan", "plan.json", "--out", "edited", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    spec = TaskSpec.load(tmp_path / "edited")
    assert spec.training.grpo_n == 6 and [m.name for m in spec.modes] == ["agent_roll_adv"]
    assert not (tmp_path / "edited" / "agent_roll.py").exists() and (tmp_path / "edited" / "agent_roll_adv.py").is_file()
    assert "grpo_n: 6" in (tmp_path / "edited" / "config_server2.yaml").read_text()
    doctor = subprocess.run([VIBE_RL, "doctor", str(tmp_path / "edited")], capture_output=True, text=True, timeout=120)
    assert doctor.returncode == 0, doctor.stdout


def test_plan_errors_name_the_field(tmp_path):
    done = new("who is spy", "--planner", "offline", "--dry-run", "--json", cwd=tmp_path)
    plan = json.loads(done.stdout)
    plan["teams"][0]["model"] = "server9"
    (tmp_path / "bad.json").write_text(json.dumps(plan))
    done = new("--plan", "bad.json", cwd=tmp_path)
    assert done.returncode != 0 and "server9" in done.stderr and "bad.json" in done.stderr
    assert not (tmp_path / "generated").exists()
    done = new("--plan", "missing.json", cwd=tmp_path)
    assert done.returncode != 0 and "--dry-run --json" in done.stderr
    done = new("who is spy", "--plan", "bad.json", cwd=tmp_path)
    assert done.returncode != 0 and "exactly one" in done.stderr


def test_an_excluded_mode_is_not_rendered(tmp_path):
    done = new("who is spy against qwen-plus; no agent_roll_adv mode", "--planner", "offline", "--out", "p",
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    names = {p.name for p in (tmp_path / "p").iterdir()}
    assert {"agent_roll.py", "agent_run.py", "config.yaml"} <= names
    assert not names & {"agent_roll_adv.py", "agent_run_adv.py", "config_server2.yaml"}
    assert "Mode agent_roll_adv left out: the spec excludes it." in done.stdout
