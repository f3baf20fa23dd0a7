"""Issue item 8: the autopilot fix loop refuses edits that would escape the project or crash the run."""

from __future__ import annotations

import os

import pytest

from vibe_rl.autopilot.fixer import EditError, FixRefusedError, apply_fix, parse_fix, snapshot


def _answer(path: str, search: str = "x = 1\n", replace: str = "x = 2\n") -> str:
    return f"WHY: test\n{path}\n<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


@pytest.fixture
def project(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "agent_run.py").write_text("x = 1\n")
    return proj


def test_item8_a_hard_link_to_a_file_outside_the_project_is_refused(tmp_path, project):
    outside = tmp_path / "outside_secret.py"
    outside.write_text("x = 1\n")
    os.link(outside, project / "linked.py")
    fix = parse_fix(_answer("linked.py"))
    with pytest.raises(FixRefusedError, match="hard links"):
        snapshot(project, fix)
    with pytest.raises(FixRefusedError, match="hard links"):
        apply_fix(project, fix)
    assert outside.read_text() == "x = 1\n"


def test_item8_edits_replace_the_file_and_never_write_through_it(project):
    target = project / "agent_run.py"
    inode = target.stat().st_ino
    os.chmod(target, 0o755)
    apply_fix(project, parse_fix(_answer("agent_run.py")))
    assert target.read_text() == "x = 2\n" and target.stat().st_ino != inode
    assert target.stat().st_mode & 0o777 == 0o755 and not list(project.glob(".*.fix"))


@pytest.mark.parametrize(("path", "error"), [("agent\x00run.py", FixRefusedError), ("bad\nname.py", FixRefusedError),
                                             ("subdir", EditError), ("binary.dat", EditError)])
def test_item8_nul_paths_directories_and_non_utf8_files_are_failed_attempts(project, path, error):
    (project / "subdir").mkdir()
    (project / "binary.dat").write_bytes(b"x = 1\n\xff\xfe\x00 not utf-8\n")
    fix = parse_fix(_answer(path)) if "\n" not in path else parse_fix(_answer("agent_run.py"))
    if "\n" in path:
        fix.edits[0].path = path
    with pytest.raises(error):
        snapshot(project, fix)
    with pytest.raises(error):
        apply_fix(project, fix)
    assert (project / "agent_run.py").read_text() == "x = 1\n"  # nothing half applied
    assert issubclass(error, (FixRefusedError, EditError))  # what the runner reports as a failed attempt


def test_issue25_item10_the_fix_prompt_holds_only_project_files(tmp_path, project):
    """What goes to the fix LLM (a third party): the project's own files only. A run_file set to an absolute path,
    a '../' path, a traceback naming a file outside, and a symlink inside the project that points out are all
    left out (named as not shown), never read."""
    from vibe_rl.autopilot.diagnose import Diagnosis
    from vibe_rl.autopilot.fixer import build_prompt

    secret = tmp_path / "secret.py"
    secret.write_text("API_KEY = 'sk-outside-the-project'\n")
    (project / "link.py").symlink_to(secret)
    diag = Diagnosis("crash", "it crashed", file=str(secret),
                     excerpt=f'Traceback:\n  File "{secret}", line 1\n  File "{project / "agent_run.py"}", line 1\n')
    prompt = build_prompt(project, diag, focus=[str(secret), "../secret.py", "link.py", "agent_run.py"])
    assert "sk-outside-the-project" not in prompt
    assert "# agent_run.py\n```\nx = 1\n" in prompt  # the project's own file is shown
    assert "Files not shown" in prompt and "'link.py'" in prompt
