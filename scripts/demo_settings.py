"""The CPU demo's numbers, in one place: `scripts/demo.sh` and `benchmarks/demo_learning.py` both read them.

    python scripts/demo_settings.py sets        # the --set flags of `vibe-rl run`
    python scripts/demo_settings.py warm-start  # the flags of the project's warm_start.py
    python scripts/demo_settings.py steps       # how many weight updates the demo runs
    python scripts/demo_settings.py plan RAW OUT  # the seed spec's plan (RAW: `vibe-rl new --dry-run --json`)
                                                  # with DEMO_GAME applied, written to OUT
"""

from __future__ import annotations

import json
import sys

# The game of the demo: the family's shaped reward on, and a small table so a CPU step stays short.
DEMO_GAME = {"shaped_reward": True, "num_players": 4, "max_rounds": 2}
# Server job on CPU (vibe-rl run adds --model tiny; these come after it). A large learning rate suits the
# <1M-parameter tiny model; 2 tasks x 2 episodes per update keeps a step short on 2 cores.
DEMO_SETS = ["train.lr=0.0003", "train.batch_size=2", "train.grpo_n=2", "rollout.max_tokens=16",
             "train.save_freq=0"]
# A short supervised warm start on the game's answer format (see the project's warm_start.py).
WARM_START = ["--steps", "60", "--batch", "16", "--lr", "0.01", "--describe-share", "0", "--eval", "20"]
DEMO_STEPS = 10

if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "sets":
        print(" ".join(f"--set {s}" for s in DEMO_SETS))
    elif what == "warm-start":
        print(" ".join(WARM_START))
    elif what == "steps":
        print(DEMO_STEPS)
    elif what == "plan":
        raw = open(sys.argv[2], encoding="utf-8").read()
        spec = json.loads(raw[raw.index("{"):])
        spec["game"].update(DEMO_GAME)
        open(sys.argv[3], "w", encoding="utf-8").write(json.dumps(spec, indent=1))
    else:
        sys.exit("usage: demo_settings.py sets|warm-start|steps|plan RAW OUT")
