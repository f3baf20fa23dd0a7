"""`vibe-rl new` and `vibe-rl init` with bad input (real CLI): a clear error naming the option, exit 2, no
traceback, and never a half-written project: a failing data script or Ctrl-C while rendering leaves the target as
it was."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
VIBE_RL = str(Path(sys.executable).parent / "vibe-rl")
SPEC = "who is spy, batch 4"


def new(*args, env=None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([VIBE_RL, "new", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120)


def refused(res: subprocess.CompletedProcess, *words: str) -> None:
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr and res.stderr.count("error:") == 1, res.stderr
    for word in words:
        assert word in res.stderr, res.stderr


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_bad_out_is_refused_before_planning(tmp_path):
    (tmp_path / "a_file").write_text("x")
    refused(new(SPEC, "--planner", "offline", "--out", str(tmp_path / "a_file")), "--out", "is a file")
    refused(new(SPEC, "--planner", "offline", "--out", str(tmp_path / "a_file" / "sub")), "--out", "is a file")
    refused(new(SPEC, "--planner", "offline", "--out", "/"), "--out", "root folder")
    project = tmp_path / "project"
    project.mkdir()
    (project / "task_spec.json").write_text("{}")
    refused(new(SPEC, "--planner", "offline", "--out", str(project / "inner")), "inside the project", "--force")
    assert leftovers(tmp_path) == ["a_file", "project"] and leftovers(project) == ["task_spec.json"]


def test_spec_file_that_is_a_folder_or_utf16_without_bom(tmp_path):
    refused(new("--spec-file", str(tmp_path), "--dry-run"), "--spec-file", "is a folder")
    spec = tmp_path / "spec.md"
    spec.write_bytes("who is spy, 谁是卧底".encode("utf-16-le"))
    refused(new("--spec-file", str(spec), "--dry-run"), "UTF-16", "iconv")


def broken_templates(tmp_path: Path, script: str) -> dict:
    """A copy of templates/ whose who_is_spy data script is `script`; the environment that uses it."""
    root = tmp_path / "templates"
    shutil.copytree(REPO / "templates", root, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "who_is_spy" / "project" / "mock_dataset.py.j2").write_text(script)
    import os

    return {**os.environ, "VIBE_RL_TEMPLATES": str(root)}


def test_a_failing_data_script_leaves_no_folder(tmp_path):
    env = broken_templates(tmp_path, "raise SystemExit('the dataset cannot be made')\n")
    out = tmp_path / "deep" / "er" / "project"
    res = new(SPEC, "--planner", "offline", "--out", str(out), env=env)
    refused(res, "mock_dataset.py", "nothing was written")
    assert not (tmp_path / "deep").exists()  # neither the project nor the parents made for it
    existing = tmp_path / "existing"  # --force into a folder with the user's files: they stay as they were
    existing.mkdir()
    (existing / "notes.txt").write_text("mine")
    refused(new(SPEC, "--planner", "offline", "--out", str(existing), "--force", env=env), "nothing was written")
    assert leftovers(existing) == ["notes.txt"] and (existing / "notes.txt").read_text() == "mine"


def test_ctrl_c_while_rendering_leaves_no_folder(tmp_path):
    marker = tmp_path / "started"
    env = broken_templates(tmp_path, f"import pathlib, time\npathlib.Path({str(marker)!r}).write_text('x')\n"
                                     "time.sleep(60)\n")
    out = tmp_path / "project"
    proc = subprocess.Popen([VIBE_RL, "new", SPEC, "--planner", "offline", "--out", str(out)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        for _ in range(600):
            if marker.exists() or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert marker.exists(), proc.communicate()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0 and "Traceback" not in err, err
    assert not out.exists() and leftovers(tmp_path) == ["started", "templates"]


@pytest.mark.parametrize("spec", ["", "   \n\t"])
def test_empty_spec(spec):
    refused(new(spec, "--dry-run"), "spec is empty")


def test_init_bad_target_or_name_writes_nothing(tmp_path):
    def init(*args):
        return subprocess.run([VIBE_RL, "init", *args], capture_output=True, text=True, cwd=tmp_path, timeout=120)

    (tmp_path / "a_file").write_text("x")
    refused(init("a_file"), "a_file is a file")
    refused(init("a_file/game"), "is a file, so no folder can be made")
    refused(init("game", "--name", "My Game!"), "--name 'My Game!'", "--name my_game")
    assert leftovers(tmp_path) == ["a_file"]  # the bad --name used to leave five files and no task_spec.json
    done = init("with space/游戏")
    assert done.returncode == 0, done.stderr
    assert "vibe-rl doctor 'with space/游戏'" in done.stdout  # the hint can be pasted into a shell
    refused(init("with space/游戏/inner"), "inside the project", "--force")


def test_plan_that_is_a_folder(tmp_path):
    refused(new("--plan", str(tmp_path), "--dry-run"), "--plan", "folder without task_spec.json")
    assert new(SPEC, "--planner", "offline", "--out", str(tmp_path / "game")).returncode == 0
    done = new("--plan", str(tmp_path / "game"), "--dry-run", "--json")  # a project folder: its task_spec.json
    assert done.returncode == 0 and '"family": "who_is_spy"' in done.stdout, done.stderr
