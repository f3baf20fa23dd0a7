#!/usr/bin/env bash
# Set-up plus the CPU demo: the seed spec -> a Who-is-Spy project -> tmux sessions
# -> the swarm server's first real weight update on the tiny offline model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
DEMO=${VIBE_RL_DEMO_DIR:-/tmp/vibe-rl-demo}
# A fresh training each time: drop the previous demo's checkpoints and episodes (its venvs are kept and reused).
rm -rf "$DEMO/experiments"
vibe-rl new --spec-file templates/who_is_spy/examples/seed_prompt.zh.md --planner offline --out "$DEMO" --force
exec vibe-rl run "$DEMO" --until first-step --stop
