#!/usr/bin/env bash
# Set-up plus the CPU demo: the seed spec -> a Who-is-Spy project with the shaped reward on -> a short warm
# start of the tiny model on the game's answer format -> tmux sessions -> weight updates until step N
# (scripts/demo_settings.py; VIBE_RL_DEMO_STEPS overrides) -> the reward of every step and its curve.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
DEMO=${VIBE_RL_DEMO_DIR:-/tmp/vibe-rl-demo}
STEPS=${VIBE_RL_DEMO_STEPS:-$(python scripts/demo_settings.py steps)}
# A fresh training each time: drop the previous demo's checkpoints and episodes (its venvs are kept and reused).
rm -rf "$DEMO/experiments"
mkdir -p "$DEMO"

# The plan of the seed spec with the demo's game settings (shaped_reward on, 4 players, 2 rounds; see
# scripts/demo_settings.py), then rendered.
vibe-rl new --spec-file templates/who_is_spy/examples/seed_prompt.zh.md --planner offline --dry-run --json > "$DEMO.plan.out"
python scripts/demo_settings.py plan "$DEMO.plan.out" "$DEMO.plan.json"
vibe-rl new --plan "$DEMO.plan.json" --out "$DEMO" --force
cat <<'EOF'
[demo] The demo trains the civilians of Who is Spy (the tiny offline model on CPU; the spy plays a frozen copy).
[demo] Reward (game_engine.shaped_reward): 1 if the civilians win, else 0, plus 0.5 x the share of their ballots
[demo] that named a living player other than the voter (a legal vote) and 0.5 x the share that named the spy.
[demo] Before RL: a short supervised warm start on the game's answer format (warm_start.py; random legal targets).
EOF
(cd "$DEMO" && python warm_start.py $(python "$OLDPWD/scripts/demo_settings.py" warm-start) --out experiments/warm_start)
# shellcheck disable=SC2046
vibe-rl run "$DEMO" --until "steps:$STEPS" --stop $(python scripts/demo_settings.py sets) \
  --set "model.path=$DEMO/experiments/warm_start/model"
vibe-rl swarm plot "$DEMO/experiments/server1" --out "$DEMO/reward_curve.png"
