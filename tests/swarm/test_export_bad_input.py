"""`vibe-rl export` with bad input (real CLI): one clear error, exit 2, no traceback, and --force never deletes a
folder that is not an earlier export (`/`, the checkpoint's own folders, a folder of other files)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

VIBE_RL = str(Path(sys.executable).parent / "vibe-rl")


def export(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([VIBE_RL, "export", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=120)


def refused(res: subprocess.CompletedProcess, *words: str) -> None:
    assert res.returncode == 2 and "Traceback" not in res.stderr and res.stderr.count("error:") == 1, res.stderr
    for word in words:
        assert word in res.stderr, res.stderr


def checkpoint(folder: Path, state, weights: str | None = "model") -> Path:
    folder.mkdir(parents=True)
    (folder / "state.json").write_text(state if isinstance(state, str) else json.dumps(state))
    if weights:
        (folder / weights).mkdir()
        (folder / weights / "config.json").write_text("{}")
    return folder


def test_damaged_checkpoints_are_named(tmp_path):
    refused(export(checkpoint(tmp_path / "c1", "not json"), "o", cwd=tmp_path), "state.json is damaged")
    refused(export(checkpoint(tmp_path / "c2", [1, 2]), "o", cwd=tmp_path), "state.json is damaged")
    refused(export(checkpoint(tmp_path / "c3", {}, weights=None), "o", cwd=tmp_path), "no model/ folder")
    refused(export(checkpoint(tmp_path / "c4", {"lora": True}, "adapter"), "o", "--merge-lora", cwd=tmp_path),
            "--base PATH")
    assert not (tmp_path / "o").exists()


def test_force_never_deletes_what_is_not_an_earlier_export(tmp_path):
    ckpt = checkpoint(tmp_path / "exp" / "checkpoints" / "step_000001", {})
    (tmp_path / "a_file").write_text("x")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    refused(export(ckpt, "/", "--force", cwd=tmp_path), "root folder")
    refused(export(ckpt, tmp_path / "exp", "--force", cwd=tmp_path), "holds the checkpoint")
    refused(export(ckpt, ckpt / "out", cwd=tmp_path), "is inside the checkpoint")
    refused(export(ckpt, "a_file", "--force", cwd=tmp_path), "is a file")
    refused(export(ckpt, mine, "--force", cwd=tmp_path), "not a model folder")
    assert (mine / "notes.txt").read_text() == "keep me" and (ckpt / "state.json").is_file()
    done = export(ckpt, "out", cwd=tmp_path)
    assert done.returncode == 0 and (tmp_path / "out" / "config.json").is_file(), done.stderr
    assert export(ckpt, "out", "--force", cwd=tmp_path).returncode == 0  # an earlier export is replaced
