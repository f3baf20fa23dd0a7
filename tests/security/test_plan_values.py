"""Issue 25 item 1: plans are data, never code. A plan file (`vibe-rl new --plan`) or an LLM planner's answer
whose values would become code, leave the project or name a foreign family is refused before anything runs;
quote-laden free text is emitted through serializers and stays a string."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.scripted_api import ScriptedAPI

from vibe_rl.planner.offline import OfflinePlanner

VIBE_RL = str(Path(sys.executable).parent / "vibe-rl")


def _plan(text: str = "who is spy, batch size 8", family: str | None = None) -> dict:
    return OfflinePlanner().plan(text, family=family).model_dump(mode="json")


def _new(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([VIBE_RL, "new", *args], capture_output=True, text=True, cwd=cwd, timeout=180,
                          env={**os.environ, **(env or {})})


def _payload(marker: Path) -> str:
    return f"__import__('pathlib').Path({str(marker)!r}).write_text('pwned')"


def _edits(marker: Path) -> dict[str, callable]:
    code = _payload(marker)

    def seed(p):
        p["game"]["dataset_seed"] = f"2024, _x={code}"

    def model_name(p):
        p["static_models"][0]["name"] = f'q" + str({code}) + "'
        p["teams"][1]["model"] = p["static_models"][0]["name"]
        p["servers"][0]["static_models"] = [p["static_models"][0]["name"]]

    def config_up(p):
        p["servers"][0]["config"] = "../outside.yaml"

    def config_abs(p):
        p["servers"][0]["config"] = str(marker.parent / "abs.yaml")

    def family(p):
        p["family"] = "../../" + marker.parent.name

    def url_env(p):
        p["servers"][0]["url_env"] = f"X\", str({code}), \""

    def url(p):
        p["static_models"][0]["base_url"] = 'http://x/"+str(' + code + ')+"'

    def role(p):
        p["teams"][0]["roles"] = [f"civilian\n{code}\n"]

    return {"dataset_seed": seed, "static_models[0].name": model_name, "servers[0].config": config_up,
            "servers[0].config ": config_abs, "family": family, "servers[0].url_env": url_env,
            "static_models[0].base_url": url, "roles": role}


@pytest.mark.parametrize("field", list(_edits(Path("/x"))))
def test_plan_file_values_never_become_code(tmp_path, field):
    marker = tmp_path / "marker"
    plan = _plan()
    _edits(marker)[field](plan)
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    done = _new(tmp_path, "--plan", "plan.json", "--out", "p")
    assert done.returncode != 0, done.stdout
    assert "refused" in done.stderr + done.stdout, done.stderr
    assert not marker.exists(), "a plan value ran as code"
    assert not (tmp_path / "p").exists() and not (tmp_path / "outside.yaml").exists()
    assert not (tmp_path / "abs.yaml").exists()
    if field.strip() != "family":
        assert field.strip().split("[")[0] in done.stderr + done.stdout  # the message names the field


def test_llm_planner_answer_cannot_run_code(tmp_path):
    """`vibe-rl new SPEC --planner openai` against a scripted model whose plan carries a payload in a game value:
    the planner retries with the refusal, a clean plan renders, and the payload never runs."""
    marker = tmp_path / "marker"
    evil, good = _plan(), _plan()
    evil["game"]["dataset_seed"] = f"2024, _x={_payload(marker)}"
    with ScriptedAPI([json.dumps(evil), json.dumps(good)]) as api:
        done = _new(tmp_path, "who is spy, batch size 8", "--planner", "openai", "--out", "p",
                    env={"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": f"{api.root}/v1",
                         "VIBE_RL_PLANNER_MODEL": "scripted"})
    assert not marker.exists(), "the LLM's plan value ran as code"
    assert done.returncode == 0, done.stderr
    assert len(api.requests) == 2 and "dataset_seed" in api.requests[1]["messages"][-1]["content"]
    assert "2024, _x" not in (tmp_path / "p" / "mock_dataset.py").read_text()


def test_quoted_free_text_stays_a_string(tmp_path):
    """A game title full of quotes and backslashes renders (it is text, not a name) and stays a literal."""
    marker = tmp_path / "marker"
    plan = _plan("nim for 2 players", family="turn_based")
    title = f'Nim""" + str({_payload(marker)}) + """ \\ \' end"'
    plan["game"]["title"] = title
    plan["game"]["spec_quote"] = 'quote """ ' + _payload(marker) + ' \\'
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    done = _new(tmp_path, "--plan", "plan.json", "--out", "p")
    assert done.returncode == 0, done.stderr
    check = subprocess.run([sys.executable, "-c", "import game_rules, agent_run; print(game_rules.TITLE)"],
                           cwd=tmp_path / "p", capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stderr
    assert check.stdout.rstrip("\n") == title and not marker.exists()


def test_a_template_that_pastes_a_string_raw_is_refused(tmp_path, monkeypatch):
    """The renderer's own guard: a Python template that forgets `| py` cannot paste a quote-laden value."""
    from vibe_rl.scaffold.families import load_family
    from vibe_rl.scaffold.render import UnsafeTemplateValueError, render_files
    from vibe_rl.schema import TaskSpec

    root = tmp_path / "templates"
    project = root / "raw" / "project"
    project.mkdir(parents=True)
    (root / "raw" / "manifest.yaml").write_text(
        "name: raw\ndescription: d\nshort_name: raw\nkeywords: {}\nparameters:\n  label: {default: x}\n")
    (project / "a.py.j2").write_text('LABEL = "{{ game.label }}"\n')
    plan = _plan()
    monkeypatch.setenv("VIBE_RL_TEMPLATES", str(root))
    plan.update(family="raw", game={"label": 'x" + __import__("os").getcwd() + "'})
    spec = TaskSpec.model_validate(plan)
    with pytest.raises(UnsafeTemplateValueError, match="serializer"):
        render_files(spec, load_family("raw"))
    spec = TaskSpec.model_validate({**plan, "game": {"label": "plain words"}})
    assert render_files(spec, load_family("raw"))["a.py"] == 'LABEL = "plain words"\n'


def test_a_parameter_without_default_takes_a_number_only(tmp_path):
    """turn_based's draw_reward has no default (null): a string there would be pasted as code; it is refused."""
    marker = tmp_path / "marker"
    plan = _plan("nim for 2 players", family="turn_based")
    plan["game"]["draw_reward"] = f"0 or {_payload(marker)}"
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    done = _new(tmp_path, "--plan", "plan.json", "--out", "p")
    assert done.returncode != 0 and "game.draw_reward" in done.stderr, done.stderr
    assert not marker.exists() and not (tmp_path / "p").exists()
    plan["game"]["draw_reward"] = 0.5
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    assert _new(tmp_path, "--plan", "plan.json", "--out", "p").returncode == 0
    assert "DRAW = 0.5" in (tmp_path / "p" / "agent_run.py").read_text()
