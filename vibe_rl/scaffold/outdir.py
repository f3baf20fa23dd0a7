"""Output folders written all at once. `vibe-rl new`, `vibe-rl init` and `vibe-rl export` check the target
first (not a file, not `/` or the home folder, not inside another project, empty unless --force), write into a
hidden folder next to it and move the result into place at the end: an error or Ctrl-C on the way leaves the
target as it was, with no half-written folder (and no parent folders created for it)."""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from vibe_rl.errors import ConfigError
from vibe_rl.schema.spec import SPEC_FILE


def _absolute(path: Path) -> Path:
    return Path(os.path.abspath(os.path.expanduser(path)))


def _missing_parents(out: Path) -> list[Path]:
    """The folders above `out` that do not exist yet, deepest first."""
    missing, parent = [], out.parent
    while not parent.exists() and parent != parent.parent:
        missing.append(parent)
        parent = parent.parent
    return missing


def enclosing_project(out: Path) -> Path | None:
    """The nearest folder above `out` that holds a task_spec.json (a vibe-rl project), if any."""
    for parent in _absolute(out).parents:
        if (parent / SPEC_FILE).is_file():
            return parent
    return None


def check_target(out: Path, option: str, force: bool, nested_ok: bool = False) -> None:
    """Refuse a target folder that cannot (or must not) be written; the message names `option` and the fix."""
    path = _absolute(out)
    if path == Path(path.anchor) or path == _absolute(Path.home()):
        raise ConfigError(f"{option} {out} is {'the root folder' if path == Path(path.anchor) else 'your home folder'}"
                          f": pick a new folder under it, e.g. {path / 'my_project'}.")
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{option} {out} is a file, not a folder. Pick a folder path (it is created if missing).")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"{option} {out}: {parent} is a file, so no folder can be made under it. Pick another path.")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"{option} {out}: {parent} is not writable by you. Pick a folder you can write to.")
    if path.is_dir() and any(path.iterdir()) and not force:
        raise ConfigError(f"{option} {out} is not empty. Pick a new folder, or pass --force to overwrite its files.")
    home = None if nested_ok else enclosing_project(path)
    if home is not None and not force:
        raise ConfigError(f"{option} {out} is inside the project {home} (it holds {SPEC_FILE}): its doctor and runs "
                          "would read this folder too. Pick a folder outside it, or pass --force to write there anyway.")


def _move_into(staged: Path, out: Path) -> None:
    if out.is_dir() and not any(out.iterdir()):
        out.rmdir()
    if not out.exists():
        os.rename(staged, out)
        return
    for src in sorted(staged.rglob("*")):  # --force into a non-empty folder: replace file by file
        dst = out / src.relative_to(staged)
        if src.is_dir():
            dst.mkdir(parents=True, exist_ok=True)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, dst)


@contextmanager
def staged_folder(out: Path, option: str) -> Iterator[Path]:
    """Yield an empty hidden folder next to `out`; when the block succeeds its content becomes `out` (an
    existing folder keeps its other files). On any error it is removed, with the parents made for it."""
    path = _absolute(out)
    missing = _missing_parents(path)
    staged = path.parent / f".{path.name}.partial-{os.getpid()}-{secrets.token_hex(3)}"
    done = False
    try:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            staged.mkdir()
        except OSError as exc:
            raise ConfigError(f"Cannot create {option} {out}: {exc.strerror or exc}. Pick a folder you can "
                              "write to.") from None
        try:
            yield staged
            _move_into(staged, path)
        except OSError as exc:
            where = f" ({exc.filename})" if exc.filename else ""
            raise ConfigError(f"Cannot write {option} {out}: {exc.strerror or exc}{where}. Nothing was written; "
                              "free some space or pick a folder you can write to.") from None
        done = True
    finally:
        shutil.rmtree(staged, ignore_errors=True)
        if not done:
            for parent in missing:  # deepest first; only the ones still empty
                try:
                    parent.rmdir()
                except OSError:
                    break
