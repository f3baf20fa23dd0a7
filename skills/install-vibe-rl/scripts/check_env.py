#!/usr/bin/env python3
"""Report what a vibe-rl install needs and what this machine has; never installs anything.

Usage: python check_env.py

Checks: the Python version, uv, torch (version, CPU or CUDA build, visible GPUs), vibe-rl
and its console script, tmux (for `vibe-rl run`), Node.js and npx (for the skills installer),
and nvidia-smi. Prints one line per item and a suggested install path. Standard library only;
torch is imported in a subprocess so a broken torch cannot crash the check.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys

TORCH_PROBE = (
    "import torch; print(torch.__version__, torch.version.cuda or 'cpu', "
    "torch.cuda.device_count() if torch.cuda.is_available() else 0)"
)


def run(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    ok = sys.version_info >= (3, 10)
    print(f"python   {sys.version.split()[0]} ({sys.executable}){'' if ok else '  <- vibe-rl needs 3.10+'}")
    for tool in ("uv", "tmux", "node", "npx", "vibe-rl", "nvidia-smi"):
        path = shutil.which(tool)
        version = run([tool, "-V" if tool == "tmux" else "--version"]) if path and tool != "nvidia-smi" else None
        print(f"{tool:8} {(version or 'found').splitlines()[0] + ' (' + path + ')' if path else 'missing'}")
    torch = run([sys.executable, "-c", TORCH_PROBE])
    if torch:
        version, cuda, gpus = torch.split()
        print(f"torch    {version} (build: {cuda}, visible GPUs: {gpus})")
    else:
        print("torch    missing in this interpreter")
    gpus = run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"]) if shutil.which(
        "nvidia-smi") else None
    if gpus:
        print("gpus     " + "; ".join(gpus.splitlines()))
    if gpus and torch and torch.split()[1] == "cpu":
        print("advice   GPUs present but torch is a CPU build: install a pinned CUDA torch in a fresh venv")
    elif gpus:
        print("advice   GPU path: uv pip install torch==<pinned>; uv pip install -e '<clone>[train,autopilot]'")
    else:
        print("advice   CPU path: pinned CPU torch first (--index-url https://download.pytorch.org/whl/cpu), "
              "then uv pip install -e '<clone>[train,autopilot]'; use model 'tiny'")
    return 0


if __name__ == "__main__":
    sys.exit(main())
