"""An agent with only the installed skills, in an empty project that sits in the user's own git repo,
follows them to a first weight update on the tiny model: the exact command blocks of the skill text run
in a shell, for a rendered family (vibe-rl-new: "Try it first on CPU") and for a hand-written game with
no template (write-swarm-client: hand-written-game.md). Real tmux (private socket), uv venvs, servers."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from skillpack import SKILLS_DIR

pytestmark = pytest.mark.slow
BIN = str(Path(sys.executable).parent)
LLM_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "VIBE_RL_FIX_MODEL", "DASHSCOPE_API_KEY")


def skill_block(page: Path, heading: str | None) -> list[str]:
    """The command lines of the first ```bash block after `heading` (comments dropped)."""
    text = page.read_text()
    if heading is not None:
        text = text[text.index(heading):]
    block = re.search(r"^```bash\n(.*?)^```", text, re.M | re.S).group(1)
    return [line.split(" # ", 1)[0].strip() for line in block.splitlines() if line.strip()]


@pytest.fixture
def user_project(tmp_path):
    if not shutil.which("tmux"):
        pytest.skip("tmux is not installed")
    project = tmp_path / "user_repo"
    project.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    shutil.copytree(SKILLS_DIR, project / ".claude" / "skills")
    sock = f"vibe-rl-skills-{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if k not in LLM_ENV}
    env.update(VIBE_RL_TMUX_SOCKET=sock, PATH=f"{BIN}:{env.get('PATH', '')}")
    yield project, env
    subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)  # our private server only
    (Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}" / sock).unlink(missing_ok=True)


def follow(lines: list[str], project: Path, env: dict, budget: float = 1200) -> str:
    """Run each line as the skill says; `vibe-rl status ... --wait` is repeated while it exits 3 (running)."""
    out, deadline = [], time.monotonic() + budget
    for line in lines:
        while True:
            res = subprocess.run(["bash", "-c", line], cwd=project, env=env, capture_output=True, text=True,
                                 timeout=max(60.0, deadline - time.monotonic()))
            out.append(f"$ {line}\n{res.stdout}{res.stderr}")
            if res.returncode == 3 and line.startswith("vibe-rl status") and time.monotonic() < deadline:
                continue
            assert res.returncode == 0, "\n".join(out)[-6000:]
            break
    return "\n".join(out)


def _check(project: Path, folder: str, log: str, env: dict) -> None:
    rep = json.loads((project / folder / "logs" / "autopilot-report.json").read_text())
    assert rep["outcome"] == "success" and rep["global_step"] >= 1, log[-4000:]
    assert all(v >= 1 for v in rep["new_updates"].values())
    assert not (project / folder / ".git").exists()  # no repository nested in the user's
    for name in rep["sessions"]:  # --stop ended them
        assert subprocess.run(["tmux", "-L", env["VIBE_RL_TMUX_SOCKET"], "has-session", "-t", f"={name}"],
                              capture_output=True).returncode


def test_following_vibe_rl_new_trains_the_reference_family_to_a_first_update(user_project):
    project, env = user_project
    lines = skill_block(project / ".claude/skills/vibe-rl-new/SKILL.md", "## Try it first on CPU")
    assert any("--detach" in x for x in lines) and any(x.startswith("vibe-rl status") for x in lines)
    log = follow(lines, project, env)
    _check(project, "examples/who_is_spy", log, env)
    assert "training has started" in log or "weight updates made" in log


def test_following_the_hand_written_game_page_trains_a_game_with_no_template(user_project):
    project, env = user_project
    page = project / ".claude/skills/write-swarm-client/references/hand-written-game.md"
    lines = skill_block(page, None)
    assert lines[0].startswith("vibe-rl init")
    log = follow(lines, project, env)
    _check(project, "my_game", log, env)
    assert json.loads((project / "taskspec.schema.json").read_text())["title"] == "TaskSpec"
    report = json.loads((project / "my_game" / "logs" / "autopilot-report.json").read_text())
    assert report["audit"].startswith("trace audit") and "OK" in report["audit"]
