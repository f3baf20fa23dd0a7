"""Fixes as search/replace edits: ask the LLM, check every path, apply, commit.

Answer format the LLM is asked for (one or more blocks):

    WHY: <one line: the cause and the fix>
    agent_run.py
    <<<<<<< SEARCH
    <exact lines from the file>
    =======
    <replacement lines>
    >>>>>>> REPLACE

Edits may only touch files inside the project folder (not .git/, venvs or logs/); an answer
with any other path is refused as a whole, so a fix is never half applied. A path with a NUL
or control character, a directory, a file with more than one hard link (an edit would write
through to the other name, maybe outside the project) and a file that is not UTF-8 text are
refused too, each as a FixRefusedError/EditError the runner reports as a failed attempt.
Files are replaced atomically (a new inode), never written through in place.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from vibe_rl.autopilot.diagnose import Diagnosis
from vibe_rl.errors import VibeRLError

_BLOCK = re.compile(r"(?P<head>[^\n]*)\n<{5,9} SEARCH\n(?P<search>.*?)\n?={5,9}\n(?P<replace>.*?)\n?>{5,9} REPLACE",
                    re.S)
_PROTECTED = (".git", "logs", "experiments")
MAX_FILE_CHARS = 12000

SYSTEM = (
    "You fix bugs in a small reinforcement-learning project (a swarm client and its config) so that "
    "training starts. Answer ONLY with a line 'WHY: <cause and fix in one line>' followed by one or more "
    "search/replace blocks, each preceded by the file path relative to the project folder:\n"
    "path/to/file.py\n<<<<<<< SEARCH\n<exact existing lines>\n=======\n<new lines>\n>>>>>>> REPLACE\n"
    "The SEARCH text must match the file exactly once. Keep edits minimal. Only files inside the project "
    "folder can be edited."
)


class FixRefusedError(VibeRLError, PermissionError):
    """An edit aimed at a file outside the project folder (or at a protected one)."""


class EditError(VibeRLError, ValueError):
    """An edit could not be applied (no SEARCH match, or several)."""


@dataclass
class Edit:
    path: str
    search: str
    replace: str


@dataclass
class Fix:
    why: str
    edits: list[Edit] = field(default_factory=list)


def parse_fix(answer: str) -> Fix:
    """WHY line plus every search/replace block of an LLM answer."""
    text = re.sub(r"^```[\w-]*\n|^```\s*$", "", answer.replace("\r\n", "\n"), flags=re.M)
    why = next((m[1].strip() for m in re.finditer(r"^WHY:\s*(.+)$", text, re.M)), "")
    edits = []
    for m in _BLOCK.finditer(text):
        head = m["head"].strip().strip("`*").removeprefix("File:").removeprefix("file:").strip()
        edits.append(Edit(head, m["search"], m["replace"]))
    if not edits:
        raise EditError("the answer holds no search/replace block; nothing to apply")
    return Fix(why or "autopilot fix", edits)


def resolve_inside(project_dir: Path, path: str) -> Path:
    """The absolute file `path` names, or FixRefusedError when it is not inside the project."""
    root = Path(project_dir).resolve()
    if not path:
        raise FixRefusedError("an edit names no file; refused")
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        raise FixRefusedError(f"edit of {path!r} refused: the path holds a NUL or control character")
    try:
        target = (Path(path) if Path(path).is_absolute() else root / path).resolve()
    except (OSError, ValueError, RuntimeError) as exc:  # loops of links, names the OS refuses
        raise FixRefusedError(f"edit of {path!r} refused: {type(exc).__name__}: {exc}") from None
    if target == root or root not in target.parents:
        raise FixRefusedError(f"edit of {path!r} refused: it is outside the project folder {root}")
    first = target.relative_to(root).parts[0]
    if first in _PROTECTED or first.startswith(".venv"):
        raise FixRefusedError(f"edit of {path!r} refused: {first}/ is managed by vibe-rl, not by fixes")
    try:
        info = target.stat() if target.exists() else None
    except OSError as exc:
        raise FixRefusedError(f"edit of {path!r} refused: {exc}") from None
    if info is not None and target.is_dir():
        raise EditError(f"{path}: is a directory, not a file; name the file to edit")
    if info is not None and info.st_nlink > 1:
        raise FixRefusedError(f"edit of {path!r} refused: the file has {info.st_nlink} hard links, so an edit "
                              "could change a file outside the project; copy it to a plain file first")
    return target


def read_project_file(target: Path, name: str) -> str:
    """A project file's text ('' when it does not exist); EditError when it is not readable UTF-8 text."""
    if not target.exists():
        return ""
    try:
        return target.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise EditError(f"{name}: is not UTF-8 text; fixes only edit text files") from None
    except OSError as exc:
        raise EditError(f"{name}: cannot be read: {exc}") from None


def _replace_file(target: Path, text: str) -> None:
    """Write `text` to a new file and rename it over `target` (mode kept): never writes through a link."""
    target.parent.mkdir(parents=True, exist_ok=True)
    mode = target.stat().st_mode & 0o7777 if target.exists() else 0o644
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".fix")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def apply_fix(project_dir: Path, fix: Fix) -> list[Path]:
    """Check every edit first, then write them all. Returns the changed files."""
    new_text: dict[Path, str] = {}
    for edit in fix.edits:
        target = resolve_inside(project_dir, edit.path)  # raises before anything is written
        text = new_text.get(target)
        if text is None:
            text = read_project_file(target, edit.path)
        if not edit.search.strip():
            if target.exists() and text.strip():
                raise EditError(f"{edit.path}: an empty SEARCH only creates new files, and this one exists")
            new_text[target] = edit.replace + ("\n" if not edit.replace.endswith("\n") else "")
            continue
        count = text.count(edit.search)
        if count != 1:
            raise EditError(f"{edit.path}: the SEARCH text matches {count} times (it must match exactly once):\n"
                            f"{edit.search[:400]}")
        new_text[target] = text.replace(edit.search, edit.replace, 1)
    for target, text in new_text.items():
        try:
            _replace_file(target, text)
        except OSError as exc:
            raise EditError(f"{target.relative_to(Path(project_dir).resolve())}: cannot be written: {exc}") from None
    return list(new_text)


# ---- git -----------------------------------------------------------------------------------------
_IDENTITY = ["-c", "user.name=vibe-rl autopilot", "-c", "user.email=autopilot@vibe-rl.invalid"]
_GITIGNORE = "logs/\n.venv-*/\nexperiments/\n__pycache__/\n*.pyc\n"


def _git(project_dir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *_IDENTITY, *args], cwd=project_dir, capture_output=True, text=True)


def ensure_git(project_dir: Path) -> None:
    """Make the project its own git repository (with a baseline commit) if it is in none yet. A project inside
    another repository is left alone: no nested repository is ever created. `vibe-rl run` does not call this."""
    project_dir = Path(project_dir)
    if (project_dir / ".git").exists() or repo_root_of(project_dir) is not None:
        return
    _git(project_dir, "init", "-q")
    # .git/info/exclude, not a .gitignore: no new file appears in the project (or in a repo around it)
    exclude = project_dir / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    exclude.write_text(exclude.read_text() + _GITIGNORE if exclude.exists() else _GITIGNORE)
    _git(project_dir, "add", "-A")
    _git(project_dir, "commit", "-q", "--allow-empty", "-m", "vibe-rl autopilot: baseline before fixes")


def commit_fix(project_dir: Path, files: list[Path], fix: Fix, diagnosis: Diagnosis) -> str:
    """Commit the changed files in the project's own repository; the message says what changed and why.
    Returns the commit hash."""
    project_dir = Path(project_dir).resolve()
    rel = [str(f.resolve().relative_to(project_dir)) for f in files]
    where = f" ({Path(diagnosis.file).name}:{diagnosis.line})" if diagnosis.file else ""
    message = (f"autopilot fix: {fix.why}\n\nWhat: edited {', '.join(rel)}\n"
               f"Why: {diagnosis.kind}{where}: {diagnosis.summary}\n")
    _git(project_dir, "add", "--", *rel)
    res = _git(project_dir, "commit", "-q", "-m", message, "--", *rel)
    if res.returncode != 0:
        raise VibeRLError(f"git commit of the fix failed in {project_dir}: {res.stderr.strip() or res.stdout}")
    return _git(project_dir, "rev-parse", "--short", "HEAD").stdout.strip()


def repo_root_of(project_dir: Path) -> Path | None:
    """The top of the git work tree holding `project_dir`, or None outside any repository."""
    res = _git(Path(project_dir), "rev-parse", "--show-toplevel")
    return Path(res.stdout.strip()).resolve() if res.returncode == 0 and res.stdout.strip() else None


def snapshot(project_dir: Path, fix: Fix) -> dict[Path, str]:
    """The current text of every file `fix` edits ('' for a file it creates): the patch's left side."""
    out = {}
    for edit in fix.edits:
        target = resolve_inside(project_dir, edit.path)
        out[target] = read_project_file(target, edit.path)
    return out


def record_fix(project_dir: Path, before: dict[Path, str], fix: Fix, diagnosis: Diagnosis) -> str:
    """Write the applied fix as `logs/fixes/NNN-<kind>.patch`; commit it too when the project is its own git
    repository (never inside a repository around it, and no repository is created). Returns where it went."""
    import difflib

    project_dir = Path(project_dir).resolve()
    folder = project_dir / "logs" / "fixes"
    folder.mkdir(parents=True, exist_ok=True)
    number = len(list(folder.glob("*.patch"))) + 1
    diff = []
    for path, old in before.items():
        rel = str(path.relative_to(project_dir))
        new = path.read_text(encoding="utf-8") if path.exists() else ""
        diff += difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                     f"a/{rel}", f"b/{rel}")
    patch = folder / f"{number:03d}-{diagnosis.kind}.patch"
    patch.write_text(f"autopilot fix: {fix.why}\nWhy: {diagnosis.kind}: {diagnosis.summary}\n"
                     f"Apply elsewhere with: git apply {patch.name}\n\n" + "".join(diff), encoding="utf-8")
    where = f"patch {patch.relative_to(project_dir)}"
    root = repo_root_of(project_dir)
    if root == project_dir:
        return f"commit {commit_fix(project_dir, list(before), fix, diagnosis)}, {where}"
    why = f"the project is inside the repository {root}" if root else "the project is not a git repository"
    return f"{where} (not committed: {why})"


# ---- the prompt ----------------------------------------------------------------------------------
def _readable_inside(project_dir: Path, name: str) -> str | None:
    """`name` relative to the project when it is a regular file inside it (symlinks resolved, one hard link, not
    under .git/.venv), else None: only the project's own files go to the fix LLM."""
    try:
        target = (project_dir / name).resolve()
        rel = target.relative_to(project_dir)
        info = os.stat(target)
    except (OSError, ValueError, RuntimeError):
        return None
    if not rel.parts or rel.parts[0].startswith((".git", ".venv")) or not stat.S_ISREG(info.st_mode) \
            or info.st_nlink > 1:
        return None
    return rel.as_posix()


def build_prompt(project_dir: Path, diagnosis: Diagnosis, spec_json: str = "", history: list[str] | None = None,
                 focus: list[str] | None = None, checks: list[str] | None = None) -> str:
    """The failure, the files it names (plus `focus` files), the TaskSpec, and earlier attempts."""
    project_dir = Path(project_dir).resolve()
    names: list[str] = []
    if diagnosis.file:
        try:
            names.append(str(Path(diagnosis.file).resolve().relative_to(project_dir)))
        except ValueError:
            pass
    for text in (diagnosis.excerpt,):  # other project files named in the traceback
        for m in re.finditer(r'File "([^"]+)"', text):
            try:
                names.append(str(Path(m[1]).resolve().relative_to(project_dir)))
            except ValueError:
                continue
    names += focus or []
    files, refused = [], []
    for i, name in enumerate(names):
        if name in names[:i]:
            continue
        inside = _readable_inside(project_dir, name)
        if inside is not None:
            files.append(inside)
        elif (project_dir / name).exists() or Path(name).is_absolute() or ".." in Path(name).parts:
            refused.append(name)
    listing = sorted(str(p.relative_to(project_dir)) for p in project_dir.rglob("*")
                     if p.is_file() and not any(part.startswith((".git", ".venv", "logs", "experiments",
                                                                  "__pycache__"))
                                                for part in p.relative_to(project_dir).parts))
    parts = [f"# Failure\n{diagnosis.render()}", "# Project files\n" + "\n".join(listing)]
    for name in files:
        body = (project_dir / name).read_text(encoding="utf-8", errors="replace")[:MAX_FILE_CHARS]
        parts.append(f"# {name}\n```\n{body}\n```")
    if refused:  # never sent: a path or link that leads out of the project (the fix LLM is a third party)
        parts.append("# Files not shown (outside the project folder, or links leading out of it)\n"
                     + "\n".join(f"- {n!r}" for n in refused))
    if spec_json:
        parts.append(f"# TaskSpec (task_spec.json)\n```json\n{spec_json[:MAX_FILE_CHARS]}\n```")
    if checks:
        parts.append("# Static checks (vibe-rl doctor)\n" + "\n".join(checks))
    if history:
        parts.append("# Earlier attempts (they did not fix it)\n" + "\n".join(f"- {h}" for h in history))
    parts.append("Answer with WHY: and search/replace blocks only.")
    return "\n\n".join(parts)
