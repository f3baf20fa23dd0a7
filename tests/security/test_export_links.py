"""Issue 25 item 12: `vibe-rl export` (real CLI) copies no symbolic link: a checkpoint whose model folder links
to a file outside it (or is itself a link) is refused, and nothing of the link's target reaches OUT."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

VIBE_RL = str(Path(sys.executable).parent / "vibe-rl")


def _checkpoint(folder: Path) -> Path:
    (folder / "model").mkdir(parents=True)
    (folder / "state.json").write_text(json.dumps({"step": 1}))
    (folder / "model" / "config.json").write_text("{}")
    return folder


def _export(ckpt: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([VIBE_RL, "export", str(ckpt), str(out)], capture_output=True, text=True, timeout=120)


def test_export_copies_no_symlink(tmp_path):
    private = tmp_path / "private.txt"
    private.write_text("secret of another file")
    ckpt = _checkpoint(tmp_path / "c1")
    (ckpt / "model" / "tokenizer.json").symlink_to(private)
    done = _export(ckpt, tmp_path / "out")
    assert done.returncode == 2 and "symbolic link" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "config.json").write_text("{}")
    (outside / "id_rsa").write_text("secret key")
    ckpt2 = tmp_path / "c2"
    ckpt2.mkdir()
    (ckpt2 / "state.json").write_text(json.dumps({"step": 1}))
    (ckpt2 / "model").symlink_to(outside, target_is_directory=True)
    done = _export(ckpt2, tmp_path / "out2")
    assert done.returncode == 2 and "symbolic link" in done.stderr, done.stderr
    assert not (tmp_path / "out2").exists()

    ok = _export(_checkpoint(tmp_path / "c3"), tmp_path / "out3")  # a plain checkpoint still exports
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "out3" / "config.json").is_file()
