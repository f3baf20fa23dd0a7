"""Each skill is valid per the Agent Skills spec (skills-ref) and follows the pack's layout rules."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from skillpack import EXPECTED_SKILLS, REPO, SKILL_NAMES, SKILLS_DIR

AGENTSKILLS = Path(sys.executable).parent / "agentskills"  # the console script of skills-ref


def test_the_pack_holds_the_four_skills():
    assert EXPECTED_SKILLS <= set(SKILL_NAMES)
    assert not (REPO / "SKILL.md").exists(), "a SKILL.md at the repo root hides the skills/ folder from installers"


@pytest.mark.parametrize("name", SKILL_NAMES)
def test_skills_ref_validate(name):
    """The reference validator (`skills-ref validate`, console script `agentskills`) accepts the skill."""
    assert AGENTSKILLS.exists(), "skills-ref is not installed: pip install skills-ref (the dev extra has it)"
    result = subprocess.run([str(AGENTSKILLS), "validate", str(SKILLS_DIR / name)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Valid skill" in result.stdout


@pytest.mark.parametrize("name", SKILL_NAMES)
def test_frontmatter_name_and_description(name):
    from skills_ref import read_properties

    props = read_properties(SKILLS_DIR / name)
    assert props.name == name
    words = props.description.lower()
    assert "use when" in words, "the description must say when to use the skill"
    assert 80 <= len(props.description) <= 1024


@pytest.mark.parametrize("name", SKILL_NAMES)
def test_layout_rules(name):
    root = SKILLS_DIR / name
    files = [p for p in root.rglob("*") if p.is_file()]
    underscored = [p for p in root.rglob("*") if p.name.startswith("_")]
    assert not underscored, f"the installer drops names starting with '_': {underscored}"
    for path in files:
        rel = path.relative_to(root)
        assert rel.parts[0] in ("SKILL.md", "references", "scripts"), f"unexpected file {rel}"
    body = (root / "SKILL.md").read_text(encoding="utf-8")
    assert len(body.splitlines()) < 200, "keep SKILL.md short; move details to references/"
    for link in re.findall(r"\]\(((?:references|scripts)/[^)#]+)\)", body):
        assert (root / link).is_file(), f"{name}/SKILL.md links to missing {link}"
    for ref in (root / "references").glob("*.md") if (root / "references").is_dir() else []:
        assert ref.name in body, f"{name}/SKILL.md never points to {ref.name}"


def _scripts():
    return sorted(p for p in SKILLS_DIR.glob("*/scripts/*") if p.is_file())


@pytest.mark.parametrize("script", _scripts(), ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_scripts_are_standalone(script):
    """Scripts run with the standard library alone (-I -S: no site-packages, no vibe-rl)."""
    assert script.suffix == ".py"
    text = script.read_text(encoding="utf-8")
    assert text.startswith("#!/usr/bin/env python3")
    assert "vibe_rl" not in text, "a skill script must not import vibe-rl: it runs anywhere"
    result = subprocess.run([sys.executable, "-I", "-S", str(script), "--help"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "usage" in result.stdout.lower()


def test_no_cjk_in_skills():
    cjk = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
    for path in SKILLS_DIR.rglob("*"):
        if path.is_file():
            assert not cjk.search(path.read_text(encoding="utf-8")), f"non-English text in {path}"
