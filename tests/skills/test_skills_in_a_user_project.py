"""The skills work in a user's project, not only in a vibe-rl checkout: installed into an empty project
(the Claude Code and OpenCode layouts), every path they name exists there, is produced by a command they
give, or is a placeholder; no checkout-only path or install step is left (pages that change vibe-rl
itself say so on their first lines)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from skillpack import SKILLS_DIR

VIBE_RL = str(Path(sys.executable).parent / "vibe-rl")
CHECKOUT_ONLY_MARK = "Checkout-only:"
CHECKOUT_PATHS = re.compile(r"(?<![\w~/$.-])(generated/|templates/|vibe_rl/|scripts/(demo|test|setup)\.sh)"
                            r"|pip install -e \"?\.|pip install -e \"?\.\[")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
INLINE = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
PATHLIKE = re.compile(r"^[\w.<>-]+(/[\w.<>*-]*)+$")
# What `vibe-rl run` writes into a project (the run tests check these files for real).
RUN_ARTIFACTS = {"logs", "experiments", "logs/fixes", "logs/run.log", "logs/run-state.json",
                 "logs/autopilot-report.json", "experiments/.previous"}
METRIC_PREFIXES = ("eval/",)  # metric names such as eval/win_rate look like paths but are keys of metrics.jsonl


def code_tokens(markdown: str) -> list[str]:
    texts = [m.group(1) for m in FENCE.finditer(markdown)] + INLINE.findall(FENCE.sub("", markdown))
    tokens = []
    for text in texts:
        for line in text.splitlines():
            line = line.split(" # ", 1)[0]
            tokens += [t.strip("\"'(),;:") for t in re.split(r"[\s=]+", line)]
    return [t for t in tokens if t]


def _install(project: Path) -> None:
    for layout in (".claude/skills", ".agents/skills"):  # what `vibe-rl skills install` lays out
        shutil.copytree(SKILLS_DIR, project / layout)


@pytest.fixture(scope="module")
def user_project(tmp_path_factory) -> Path:
    """An empty project in the user's own git repo, the skills installed, and what the skills' own
    commands produce (a rendered reference project and a hand-written skeleton; no training run)."""
    project = tmp_path_factory.mktemp("user") / "my_project"
    project.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    _install(project)
    for cmd in (["new", "Who is Spy, 6 players, 1 spy; train the civilians", "--family", "who_is_spy",
                 "--planner", "offline", "--out", "examples/who_is_spy"], ["init", "my_game"]):
        res = subprocess.run([VIBE_RL, *cmd], cwd=project, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stdout + res.stderr
    return project


def _pages(project: Path):
    root = project / ".claude" / "skills"
    return sorted(root.rglob("*.md"))


def test_the_skills_commands_produce_the_projects_they_describe(user_project):
    assert (user_project / "examples" / "who_is_spy" / "task_spec.json").is_file()
    assert {"game.py", "agent_run.py", "agent_roll.py", "config.yaml", "task_spec.json"} <= {
        p.name for p in (user_project / "my_game").iterdir()}
    res = subprocess.run([VIBE_RL, "doctor", "my_game"], cwd=user_project, capture_output=True, text=True)
    assert res.returncode == 0 and "0 error(s)" in res.stdout, res.stdout + res.stderr


def test_no_page_assumes_a_vibe_rl_checkout(user_project):
    bad = []
    for page in _pages(user_project):
        text = page.read_text()
        if CHECKOUT_ONLY_MARK in "\n".join(text.splitlines()[:4]):
            continue
        bad += [f"{page.name}: {m.group(0)!r}" for m in CHECKOUT_PATHS.finditer(text)]
    assert not bad, bad


def test_every_link_and_path_resolves_in_the_users_project(user_project):
    missing = []
    for page in _pages(user_project):
        text = page.read_text()
        skill = page.parent if page.name == "SKILL.md" else page.parent.parent
        for target in LINK.findall(text):
            if not target.startswith(("http://", "https://", "#")):
                if not (page.parent / target.split("#", 1)[0]).exists():
                    missing.append(f"{page.relative_to(user_project)}: link {target}")
        if CHECKOUT_ONLY_MARK in "\n".join(text.splitlines()[:4]):
            continue
        for token in code_tokens(text):
            if not PATHLIKE.fullmatch(token) or token.startswith(("http", "~", "$", "/", *METRIC_PREFIXES)) \
                    or "*" in token:
                continue
            if token.startswith("<this-skill>/"):
                if not (skill / token.split("/", 1)[1]).exists():
                    missing.append(f"{page.relative_to(user_project)}: {token}")
                continue
            if "<" in token or ">" in token:  # a placeholder the reader fills in
                continue
            clean = token.rstrip("/")
            found = (skill / clean).exists() or (user_project / clean).exists() or clean in RUN_ARTIFACTS
            if not found:
                missing.append(f"{page.relative_to(user_project)}: {token}")
    assert not missing, "\n".join(missing)


def test_one_rule_for_unparseable_answers():
    """Every page that talks about unparseable answers points at the one rule, and none says otherwise."""
    pages = [p for p in SKILLS_DIR.rglob("*.md") if re.search(r"unparseable|no valid action", p.read_text(), re.I)]
    assert len(pages) >= 3
    for page in pages:
        text = page.read_text()
        assert "hand-written-game.md#unparseable-answers" in text or page.name == "hand-written-game.md" \
            or "unparseable-answer rule" in text, page
        assert "abstention),\nnot an exception" not in text and "a legal move of the game" not in text
    rule = (SKILLS_DIR / "write-swarm-client" / "references" / "hand-written-game.md").read_text()
    assert "never better for the seat than its worst legal\nmove" in rule and "never aborted" in rule
