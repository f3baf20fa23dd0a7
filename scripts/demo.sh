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

# The plan of the seed spec with the demo's game and reward (shaped_reward on, the outcome weighted 0, 4 players,
# one round; see scripts/demo_settings.py), then rendered.
vibe-rl new --spec-file templates/who_is_spy/examples/seed_prompt.zh.md --planner offline --dry-run --json > "$DEMO.plan.out"
python scripts/demo_settings.py plan "$DEMO.plan.out" "$DEMO.plan.json"
vibe-rl new --plan "$DEMO.plan.json" --out "$DEMO" --force
echo "[demo] The demo trains the civilians of Who is Spy (the tiny offline model on CPU; the spy plays a frozen copy)."
echo "[demo] Reward: $(python scripts/demo_settings.py reward)."
echo "[demo] Before RL: a short supervised warm start on the game's answer format (warm_start.py: one fixed"
echo "[demo] description, votes for random legal targets); it prints the share of legal votes it then samples."
(cd "$DEMO" && python warm_start.py $(python "$OLDPWD/scripts/demo_settings.py" warm-start) --out experiments/warm_start)
# shellcheck disable=SC2046
vibe-rl run "$DEMO" --until "steps:$STEPS" --stop $(python scripts/demo_settings.py sets) \
  --set "model.path=$DEMO/experiments/warm_start/model"
vibe-rl swarm plot "$DEMO/experiments/server1" --out "$DEMO/reward_curve.png"
