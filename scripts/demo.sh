#!/usr/bin/env bash
# Set-up plus the CPU demo: the seed spec -> a Who-is-Spy project -> tmux sessions
# -> the swarm server's first real weight update on the tiny offline model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
vibe-rl new --spec-file templates/who_is_spy/examples/seed_prompt.zh.md --planner offline --out /tmp/vibe-rl-demo --force
exec vibe-rl run /tmp/vibe-rl-demo --until first-step --stop
