"""The real installers: the `skills` CLI from npm puts every skill where Claude Code and OpenCode
look, the real OpenCode lists them with their descriptions, and `vibe-rl skills install` wraps it.

These download Node 22, `skills` and `opencode-ai` from npm on first use (minutes); they skip
only when npx is absent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from skillpack import REPO, SKILL_NAMES

pytestmark = pytest.mark.npm

INSTALL = ["-y", "-p", "node@22", "-p", "skills", "skills", "add"]


def _run(cmd: list[str], cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "CI": "1", "NO_COLOR": "1", "DO_NOT_TRACK": "1", "DISABLE_TELEMETRY": "1"}
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{cmd} failed ({result.returncode}):\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result


def _frontmatter_description(skill_md: Path) -> str:
    from skills_ref import read_properties

    return read_properties(skill_md.parent).description


@pytest.fixture(scope="module")
def installed_project(npx, tmp_path_factory) -> Path:
    """A fresh project with every skill installed for both agents by the real `skills` CLI."""
    project = tmp_path_factory.mktemp("agent-project")
    _run([npx, *INSTALL, str(REPO), "--skill", "*", "-a", "claude-code", "-a", "opencode", "-y"], cwd=project)
    return project


def test_skills_cli_installs_every_skill_for_both_agents(installed_project):
    opencode_dir = installed_project / ".agents" / "skills"   # OpenCode reads the universal folder
    claude_dir = installed_project / ".claude" / "skills"
    for name in SKILL_NAMES:
        for root in (opencode_dir, claude_dir):
            skill = root / name
            assert (skill / "SKILL.md").is_file(), f"{skill}/SKILL.md missing"
            assert (skill / "SKILL.md").read_text() == (REPO / "skills" / name / "SKILL.md").read_text()
            source_files = sorted(p.relative_to(REPO / "skills" / name).as_posix()
                                  for p in (REPO / "skills" / name).rglob("*") if p.is_file())
            real = skill.resolve()                                     # Claude Code's copy may be a symlink
            landed = sorted(p.relative_to(real).as_posix() for p in real.rglob("*") if p.is_file())
            assert landed == source_files, f"{skill}: files differ from the checkout"
    lock = json.loads((installed_project / "skills-lock.json").read_text())
    assert sorted(lock["skills"]) == SKILL_NAMES, "the installer found skills outside skills/ (or missed some)"


def test_opencode_lists_the_skills_with_descriptions(npx, installed_project):
    result = _run([npx, "-y", "opencode-ai", "debug", "skill"], cwd=installed_project)
    text = result.stdout
    listed = json.loads(text[text.index("["):])                # a JSON list of {name, description, location, ...}
    mine = {s["name"]: s for s in listed if str(s.get("location", "")).startswith(str(installed_project))}
    assert set(SKILL_NAMES) <= set(mine), f"OpenCode lists {sorted(mine)}; expected {SKILL_NAMES}"
    for name in SKILL_NAMES:
        want = _frontmatter_description(REPO / "skills" / name / "SKILL.md")
        assert mine[name]["description"] == want


def test_vibe_rl_skills_install_wraps_the_installer(npx, tmp_path):
    """`vibe-rl skills install --agent claude-code` run inside a project installs from this checkout."""
    vibe_rl = Path(sys.executable).parent / "vibe-rl"
    result = _run([str(vibe_rl), "skills", "install", "--agent", "claude-code"], cwd=tmp_path)
    assert "skills add" in result.stdout and str(REPO) in result.stdout   # it prints the real command
    for name in SKILL_NAMES:
        skill = tmp_path / ".claude" / "skills" / name
        assert (skill / "SKILL.md").is_file()
        assert not skill.is_symlink(), "a claude-code-only install copies the skill (no universal folder)"
    assert not (tmp_path / ".agents").exists(), "OpenCode was not asked for"


def test_vibe_rl_skills_install_global_for_opencode(npx, tmp_path):
    """`--global --agent opencode` installs under the home directory, where OpenCode looks for user skills."""
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    env = {**os.environ, "HOME": str(home), "npm_config_cache": os.path.expanduser("~/.npm"), "NO_COLOR": "1"}
    vibe_rl = Path(sys.executable).parent / "vibe-rl"
    result = subprocess.run([str(vibe_rl), "skills", "install", "--agent", "opencode", "--global"], cwd=project,
                            env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for name in SKILL_NAMES:
        assert (home / ".agents" / "skills" / name / "SKILL.md").is_file()
    assert list(project.iterdir()) == [], "a global install writes nothing into the project"
