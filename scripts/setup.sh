#!/usr/bin/env bash
# Creates .venv with the CPU build of torch and vibe-rl (editable) with its extras.
# Idempotent: a second run only checks. torch is installed first and pinned so no
# resolver ever pulls a multi-GB CUDA build on a CPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
TORCH_VERSION=${VIBE_RL_TORCH:-2.13.0}
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv"
  "$PY" -m venv .venv
fi
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  echo "[setup] installing torch==$TORCH_VERSION (CPU build)"
  .venv/bin/pip install -q "torch==$TORCH_VERSION"
fi
if ! .venv/bin/python -c "import vibe_rl, transformers, fastapi, pytest, libtmux, skills_ref, tensorboard, matplotlib, datasets" 2>/dev/null \
   || [ pyproject.toml -nt .venv/.vibe-rl-installed ]; then
  echo "[setup] installing vibe-rl[train,dev] (editable)"
  .venv/bin/pip install -q -e ".[train,dev]"
  touch .venv/.vibe-rl-installed
fi
echo "[setup] ready: $(.venv/bin/python -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)')"
