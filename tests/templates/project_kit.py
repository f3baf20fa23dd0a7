"""Shared parts of the template-family tests (tests/templates/test_*_project.py and test_*_run.py): the committed
generated projects, their drift and lint checks, `vibe-rl swarm start` servers with the tiny model, and
`vibe-rl run` until the first weight update on a private tmux socket."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from helpers.ports import free_port
from helpers.servers import start_server, stop_server  # noqa: F401  (used by the project tests)

REPO = Path(__file__).resolve().parents[2]
VIBE_RL = str(Path(sys.executable).parent / "vibe-rl")
# What `vibe-rl run` must not inherit from the developer's shell: every run test is offline and keyless.
LLM_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "VIBE_RL_FIX_MODEL")


def files_of(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()
                  and not any(part.startswith((".", "__pycache__")) for part in p.relative_to(folder).parts))


def copy_project(project: Path, tmp_path: Path) -> Path:
    """A scratch copy of a committed generated project (without caches and dot files)."""
    dst = tmp_path / project.name
    shutil.copytree(project, dst, ignore=shutil.ignore_patterns("__pycache__", ".*"))
    return dst


def assert_matches_the_templates(project: Path, seed: Path, tmp_path: Path) -> None:
    """`vibe-rl new` from the seed prompt renders exactly the committed generated project."""
    out = tmp_path / project.name
    done = subprocess.run([VIBE_RL, "new", "--spec-file", str(seed), "--planner", "offline", "--out", str(out)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert files_of(out) == files_of(project)
    for name in files_of(out):
        assert (out / name).read_text() == (project / name).read_text(), (
            f"generated/{project.name}/{name} drifted from the templates: regenerate it with vibe-rl new "
            f"--spec-file {seed.relative_to(REPO)} --planner offline --out generated/{project.name} --force")


def ruff_check(project: Path) -> subprocess.CompletedProcess:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or "ruff"
    return subprocess.run([ruff, "check", "--no-cache", str(project)], capture_output=True, text=True, timeout=120)


def pytest_inside(project: Path, test_file: str) -> subprocess.CompletedProcess:
    """The project's own test file, run with pytest in the project folder."""
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test_file],
                          cwd=project, capture_output=True, text=True, timeout=300)


# ---- real swarm servers with the tiny model -------------------------------------------------------

# ---- vibe-rl run until the first weight update ----------------------------------------------------

def copy_with_free_ports(project: Path, tmp_path: Path) -> Path:
    dst = tmp_path / project.name
    shutil.copytree(project, dst, ignore=shutil.ignore_patterns("__pycache__", ".*", "logs", "experiments"))
    spec = json.loads((dst / "task_spec.json").read_text())
    for server in spec["servers"]:
        server["port"] = free_port()
    (dst / "task_spec.json").write_text(json.dumps(spec, indent=2) + "\n")
    return dst


def run_until_first_step(project: Path, keep_out: tuple[str, ...] = ()) -> tuple[subprocess.CompletedProcess, dict]:
    """`vibe-rl run --until first-step --stop` on a private tmux socket, without LLM_ENV or `keep_out` variables."""
    if not shutil.which("tmux"):
        pytest.skip("tmux is not installed")
    sock = f"vibe-rl-test-{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if k not in LLM_ENV + keep_out}
    env.update(VIBE_RL_TMUX_SOCKET=sock, PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '')}")
    try:
        done = subprocess.run([VIBE_RL, "run", str(project), "--device", "cpu", "--fix", "off", "--until",
                               "first-step", "--timeout", "600", "--stop"], env=env, capture_output=True, text=True,
                              timeout=900)
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)  # our private server only
    report = json.loads((project / "logs" / "autopilot-report.json").read_text())
    return done, report


def _load(path: Path, as_name: str):
    spec = importlib.util.spec_from_file_location(as_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[as_name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def load_project_tests(project: Path, pure_module: str, family: str, test_file: str):
    """Import a template's own test module with its `pure_module` (e.g. game_engine) bound to that family's
    copy, under family-specific names so several families' modules of the same name do not collide."""
    saved = sys.modules.get(pure_module)
    sys.modules[pure_module] = _load(project / f"{pure_module}.py", f"{family}_{pure_module}")
    try:
        return _load(project / test_file, f"{family}_project_tests")
    finally:
        if saved is None:
            sys.modules.pop(pure_module, None)
        else:
            sys.modules[pure_module] = saved


def sessions_without_hash(spec):
    """The tmux sessions `vibe-rl run` would open for this spec, with the project-folder hash taken out."""
    from pathlib import Path

    from vibe_rl.autopilot import identity

    folder = Path("/projects/demo")
    return [name.replace(f"-{identity.key(folder)}-", "-") for name in identity.all_sessions(spec, folder)]
