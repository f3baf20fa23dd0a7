"""Trace audit and search/replace fixes (pure functions plus real git)."""

import subprocess

import pytest

from vibe_rl.autopilot.audit import Expected, audit_traces
from vibe_rl.autopilot.diagnose import Diagnosis
from vibe_rl.autopilot.fixer import (
    EditError,
    FixRefusedError,
    apply_fix,
    build_prompt,
    commit_fix,
    ensure_git,
    parse_fix,
    record_fix,
    snapshot,
)

EXPECTED = {"civilian": Expected("server", "server1", "civilians"), "spy": Expected("static", "qwen-max", "spies")}


def _call(player, model, static):
    return {"episode_uuid": "e1", "player": player, "model": model, "static": static, "ts": 0}


def test_audit_passes_when_every_role_reaches_its_model():
    calls = {"server1": [_call("civilian:player_1", "server1", False), _call("spy:player_2", "qwen-max", True),
                         _call("civilian:player_3", "server1", False)]}
    res = audit_traces(calls, EXPECTED)
    assert res.ok and res.checked == 3


def test_audit_names_a_spy_on_the_civilians_model():
    calls = {"server1": [_call("civilian:player_1", "server1", False), _call("spy:player_4", "server1", False),
                         _call("spy:player_4", "server1", False), _call("spy:player_2", "qwen-max", True)]}
    res = audit_traces(calls, EXPECTED)
    assert not res.ok and res.players == ["spy:player_4"]
    assert "spy:player_4 (team spies) should call static model 'qwen-max'" in res.mismatches[0]
    assert "[2 calls]" in res.mismatches[0]


def test_audit_adversarial_two_servers():
    expected = {"civilian": Expected("server", "server1"), "spy": Expected("server", "server2")}
    calls = {"server1": [_call("civilian:player_1", "m", False)], "server2": [_call("civilian:player_5", "m", False),
                                                                            _call("spy:player_2", "m", False), {"player": None}]}
    res = audit_traces(calls, expected)
    assert res.players == ["civilian:player_5"] and res.untagged == 1


def _project(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "agent_run.py").write_text("def run():\n    return make_playrs()\n\n\ndef make_players():\n    return 1\n")
    return proj


ANSWER = """Here you go.
WHY: typo in the helper name
```python
agent_run.py
<<<<<<< SEARCH
    return make_playrs()
=======
    return make_players()
>>>>>>> REPLACE
```
"""


def test_fix_is_applied_and_committed(tmp_path):
    proj = _project(tmp_path)
    ensure_git(proj)  # the run does this before any fix, so the baseline is the unfixed project
    fix = parse_fix(ANSWER)
    assert fix.why == "typo in the helper name" and fix.edits[0].path == "agent_run.py"
    changed = apply_fix(proj, fix)
    assert "make_players()" in (proj / "agent_run.py").read_text() and "playrs" not in (proj / "agent_run.py").read_text()
    diag = Diagnosis("traceback", "NameError: name 'make_playrs' is not defined", "c", str(proj / "agent_run.py"), 2)
    commit_fix(proj, changed, fix, diag)
    log = subprocess.run(["git", "log", "--format=%B"], cwd=proj, capture_output=True, text=True).stdout
    assert log.count("autopilot") == 2  # baseline + fix
    assert "autopilot fix: typo in the helper name" in log and "agent_run.py:2" in log and "NameError" in log
    assert subprocess.run(["git", "status", "--porcelain"], cwd=proj, capture_output=True, text=True).stdout == ""


@pytest.mark.parametrize("path", ["../outside.py", "/etc/passwd", ".git/config", ".venv-client/bin/python",
                                  "logs/x.log"])
def test_edit_outside_project_is_refused_and_nothing_written(tmp_path, path):
    proj = _project(tmp_path)
    (tmp_path / "outside.py").write_text("x = 1\n")
    before = (proj / "agent_run.py").read_text()
    answer = ANSWER + f"\n{path}\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n"
    with pytest.raises(FixRefusedError):
        apply_fix(proj, parse_fix(answer))
    assert (proj / "agent_run.py").read_text() == before  # refused as a whole
    assert (tmp_path / "outside.py").read_text() == "x = 1\n"


def test_symlink_escape_is_refused(tmp_path):
    proj = _project(tmp_path)
    (tmp_path / "secret.py").write_text("x = 1\n")
    (proj / "link.py").symlink_to(tmp_path / "secret.py")
    with pytest.raises(FixRefusedError):
        apply_fix(proj, parse_fix("WHY: x\nlink.py\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n"))


def test_search_must_match_once(tmp_path):
    proj = _project(tmp_path)
    with pytest.raises(EditError):
        apply_fix(proj, parse_fix("WHY: x\nagent_run.py\n<<<<<<< SEARCH\nnot there\n=======\ny\n>>>>>>> REPLACE\n"))
    with pytest.raises(EditError):
        parse_fix("I think the bug is in agent_run.py")


def test_prompt_holds_failure_files_and_spec(tmp_path):
    proj = _project(tmp_path)
    diag = Diagnosis("traceback", "NameError: x", "c", str(proj / "agent_run.py"), 2,
                     excerpt=f'File "{proj}/agent_run.py", line 2')
    prompt = build_prompt(proj, diag, spec_json='{"short_name": "spy"}', history=["attempt 1: refused"])
    assert "# agent_run.py" in prompt and "make_playrs" in prompt and '"short_name": "spy"' in prompt
    assert "attempt 1: refused" in prompt


def test_git_baseline_leaves_out_venvs_logs_and_experiments(tmp_path):
    proj = _project(tmp_path)
    for d in (".venv-client", "logs", "experiments"):
        (proj / d).mkdir()
        (proj / d / "x.txt").write_text("x")
    ensure_git(proj)
    tracked = subprocess.run(["git", "ls-files"], cwd=proj, capture_output=True, text=True).stdout.split()
    assert tracked == ["agent_run.py"] and not (proj / ".gitignore").exists()


def _git(cwd, *args):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd,
                          capture_output=True, text=True)


def test_a_project_inside_the_users_repo_gets_a_patch_and_no_nested_repo(tmp_path):
    outer = tmp_path / "user_repo"
    outer.mkdir()
    _git(outer, "init", "-q")
    proj = _project(outer)
    ensure_git(proj)  # inside another repository: refuses to nest
    assert not (proj / ".git").exists()
    fix = parse_fix(ANSWER)
    before = snapshot(proj, fix)
    apply_fix(proj, fix)
    diag = Diagnosis("traceback", "NameError: name 'make_playrs' is not defined", "c", str(proj / "agent_run.py"), 2)
    where = record_fix(proj, before, fix, diag)
    assert not (proj / ".git").exists() and "not committed" in where and str(outer.resolve()) in where
    patch = proj / "logs" / "fixes" / "001-traceback.patch"
    text = patch.read_text()
    assert "-    return make_playrs()" in text and "+    return make_players()" in text
    # the patch is real: it reverses cleanly in the user's repository
    assert _git(outer, "apply", "-R", "--check", "--directory", proj.relative_to(outer).as_posix(),
                str(patch)).returncode == 0, text
    assert _git(outer, "log").returncode != 0  # nothing was committed in the user's repo


def test_a_project_that_is_its_own_repo_gets_a_commit_and_a_patch(tmp_path):
    proj = _project(tmp_path)
    ensure_git(proj)
    fix = parse_fix(ANSWER)
    before = snapshot(proj, fix)
    apply_fix(proj, fix)
    where = record_fix(proj, before, fix, Diagnosis("traceback", "NameError", "c"))
    assert where.startswith("commit ") and "logs/fixes/001-traceback.patch" in where
    assert "autopilot fix: typo in the helper name" in _git(proj, "log", "--format=%B").stdout
