"""The docs cannot drift from the CLI: every `vibe-rl ...` command and flag that the skills, the
README and docs/ show in code must be known to `vibe-rl <command> --help`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from skillpack import REPO, SKILLS_DIR

VIBE_RL = Path(sys.executable).parent / "vibe-rl"
DOCS = sorted([REPO / "README.md", *SKILLS_DIR.rglob("*.md"),
               *(p for p in (REPO / "docs").glob("*.md") if p.name != "architecture.md")])

_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
_INLINE = re.compile(r"`([^`\n]+)`")
_MENTION = re.compile(r"(?<![\w./\-\['\"])vibe-rl(?=\s|$)")
_CUT = re.compile(r"\s(?:&&|\|\||\||;|#)\s|[;`)]")  # shell separators and comments end a command
_FLAG = re.compile(r"--?[A-Za-z][\w-]*")


def code_texts(markdown: str) -> list[str]:
    """Fenced code blocks and inline code spans (outside fences)."""
    blocks = [m.group(1) for m in _FENCE.finditer(markdown)]
    prose = _FENCE.sub("", markdown)
    return blocks + _INLINE.findall(prose)


def mentions(markdown: str) -> list[list[str]]:
    """Token lists of every `vibe-rl` command in the code of a markdown text (without 'vibe-rl')."""
    found = []
    for code in code_texts(markdown):
        for line in code.splitlines():
            for m in _MENTION.finditer(line):
                rest = _CUT.split(line[m.end():] + " ", maxsplit=1)[0]
                found.append([t.strip("[]{}<>\"',") for t in rest.split() if t.strip("[]{}<>\"',")])
    return found


def resolve(root, tokens: list[str]) -> tuple[list, object, list[str], str | None]:
    """(command path, command, flags used, error) for one mention. Groups are duck-typed (`commands`):
    typer vendors its own click."""
    cmd, path, i = root, [], 0
    while hasattr(cmd, "commands") and i < len(tokens) and not tokens[i].startswith("-"):
        sub = cmd.commands.get(tokens[i])
        if sub is None:
            return path, cmd, [], f"unknown command `vibe-rl {' '.join(path + [tokens[i]])}`"
        cmd, path, i = sub, path + [tokens[i]], i + 1
    flags = [t.split("=", 1)[0] for t in tokens[i:] if _FLAG.fullmatch(t.split("=", 1)[0])]
    return path, cmd, flags, None


def known_flags(cmd) -> set[str]:
    return {"--help"} | {o for p in cmd.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")}


def test_the_scanner_finds_commands_and_wrong_flags():
    """The checker itself: it must see commands in fences and inline code and reject unknown names."""
    sample = ("Run `vibe-rl skills install --agent opencode` or\n\n```bash\ncd x && vibe-rl skills install "
              "--global --frobnicate  # note\nvibe-rl frob\npip install 'vibe-rl[train]'\n```\n")
    found = mentions(sample)
    assert ["skills", "install", "--global", "--frobnicate"] in found and ["frob"] in found
    assert len(found) == 3
    from vibe_rl.cli import get_app

    root = typer.main.get_command(get_app())
    path, cmd, flags, error = resolve(root, ["skills", "install", "--global", "--frobnicate"])
    assert error is None and path == ["skills", "install"]
    assert set(flags) - known_flags(cmd) == {"--frobnicate"}
    assert resolve(root, ["frob"])[3] == "unknown command `vibe-rl frob`"


def test_every_documented_command_and_flag_exists():
    from vibe_rl.cli import get_app

    root = typer.main.get_command(get_app())
    problems, used = [], {}
    for doc in DOCS:
        for tokens in mentions(doc.read_text(encoding="utf-8")):
            path, cmd, flags, error = resolve(root, tokens)
            where = f"{doc.relative_to(REPO)}: vibe-rl {' '.join(tokens)}"
            if error:
                problems.append(f"{where}\n    -> {error}")
                continue
            unknown = [f for f in flags if f not in known_flags(cmd)]
            if unknown:
                problems.append(f"{where}\n    -> `vibe-rl {' '.join(path)}` has no {', '.join(unknown)}")
            used.setdefault(tuple(path), set()).update(flags)
    assert not problems, "docs mention commands/flags the CLI does not have:\n" + "\n".join(problems)
    assert len(used) >= 6, f"suspiciously few documented commands were found: {sorted(used)}"

    # The real console script's help agrees (what a user would see).
    env = {**os.environ, "COLUMNS": "300", "TERMINAL_WIDTH": "300", "NO_COLOR": "1"}
    for path, flags in sorted(used.items()):
        result = subprocess.run([str(VIBE_RL), *path, "--help"], capture_output=True, text=True, env=env, timeout=120)
        assert result.returncode == 0, f"vibe-rl {' '.join(path)} --help failed:\n{result.stderr}"
        for flag in flags:
            assert flag in result.stdout, f"`vibe-rl {' '.join(path)} --help` does not show {flag}"


@pytest.mark.parametrize("name", ["README.md"])
def test_readme_starts_with_the_two_setup_commands(name):
    text = (REPO / name).read_text(encoding="utf-8")
    first_section = text.split("\n## ", 2)[1] if "\n## " in text else text
    assert "bash scripts/demo.sh" in first_section and "bash scripts/test.sh" in first_section
    ci = (REPO / ".ci" / "run").read_text()
    assert "bash scripts/test.sh" in ci, ".ci/run must call exactly the README's test command"
