"""The CPU demo's numbers, in one place: `scripts/demo.sh` and `benchmarks/demo_learning.py` both read them.

    python scripts/demo_settings.py sets        # the --set flags of `vibe-rl run`
    python scripts/demo_settings.py warm-start  # the flags of the project's warm_start.py
    python scripts/demo_settings.py steps       # how many weight updates the tiny-model demo runs
    python scripts/demo_settings.py smol-steps  # how many weight updates the SmolLM2 demo runs
    python scripts/demo_settings.py smol-eval   # held-out games of the SmolLM2 demo's eval rounds
    python scripts/demo_settings.py reward      # what the demo trains on, in words
    python scripts/demo_settings.py plan RAW OUT  # the seed spec's plan (RAW: `vibe-rl new --dry-run --json`)
                                                  # with the demo's game and reward, written to OUT
"""

from __future__ import annotations

import json
import sys

# The game of the demo: the family's shaped reward on, and a small table (4 players, one round: 8 calls a
# game) so a CPU step stays short. hit_credit 0: the warm start teaches every player one fixed description, so
# a ballot that names the spy is luck (one chance in three), a term the model cannot learn that only adds noise.
DEMO_GAME = {"shaped_reward": True, "num_players": 4, "max_rounds": 1, "hit_credit": 0.0}
# The outcome weighs 0 in the demo (the plan's reward.win and reward.loss): with 8 games an update, a win (about
# one game in five, whatever the civilians vote) is noise that drowns what the tiny model can learn in minutes.
REWARD = ("game_engine.shaped_reward with the outcome weighted 0 (reward.win = reward.loss = 0) and hit_credit 0: "
          "per game, 0.5 x the share of the civilians' ballots that named a living player other than the voter "
          "(a legal vote); from 0 to 0.5. Each civilian trains on its own ballot (0.5 legal, 0 not: the game's "
          "seat_rewards, train.advantage=individual)")
DEMO_REWARD = {"win": 0.0, "loss": 0.0, "description": REWARD}
# Server job on CPU (vibe-rl run adds --model tiny; these come after it): 2 tasks x 4 episodes an update, a
# learning rate that moves the <1M-parameter tiny model within 10 updates (warmed up over 3: Adam's first steps
# are its largest, and without the warmup most seeds dipped over the first updates), a KL term to the warm start that keeps
# it from drifting into garbage, and answers capped at 8 tokens (a vote or a description needs 4-5).
DEMO_SETS = ["train.lr=0.001", "train.warmup_steps=3", "train.batch_size=2", "train.grpo_n=4", "train.kl_coef=0.1",
             "rollout.max_tokens=8", "train.save_freq=0"]
# A short supervised warm start on the game's answer format (see the project's warm_start.py): a quarter
# descriptions, the rest votes for random legal targets.
WARM_START = ["--steps", "30", "--batch", "8", "--lr", "0.003", "--describe-share", "0.25", "--eval", "24"]
DEMO_STEPS = 10
# SmolLM2-135M-Instruct on CPU (`--model smollm2`, what the demo trains): bf16 weights where the CPU multiplies bf16
# natively (AVX512-BF16 or AMX: about 3x fp32 on such cores), else fp32 (elsewhere torch emulates bf16: 3.6x slower
# than fp32 on a 2-core AVX512 machine without BF16), with a LoRA adapter in fp32 (a pure-bf16 full fine-tune
# rounds small updates away), two
# tasks of 4 games an update (24 civilian ballots: with one task, 12 ballots at a 5-10% legal rate left most groups
# all-zero and a run at lr 1e-3 collapsed), lr 5e-4, answers capped at 16 tokens (benchmarks/learning_curve.py).
# Micro-batches of 4: the logits of 8 rows x ~500 tokens x 49,152 vocabulary made the server's peak over 9 GB.
# Per-seat credit (train.advantage=individual): each civilian's turns get the advantage of its own ballot within
# the group's 12 civilian seats, not the game's mean; with the game's mean, one legal ballot also rewarded the
# two illegal ones of its game, and 8 updates moved the legal-ballot share in some seeds only (8% -> 8%,
# 11% -> 33%); with per-seat credit 5 of 5 seeds went from 6-11% to 75-89% (README, "The CPU demo").
# Paged generation on CPU too (model.generator=paged; auto takes the simple loop there): an eval round of 8 games
# took 57 s / 49 s against 82 s / 87 s with the simple loop.
SMOL_SETS = ["model.lora.rank=16", "model.lora.alpha=32", "train.lr=0.0005",
             "train.batch_size=2", "train.grpo_n=4", "rollout.max_tokens=16", "train.save_freq=0",
             "train.micro_batch_size=4", "train.advantage=individual", "model.generator=paged"]
# The SmolLM2 demo's game: the demo's table, and the describe turns sent as context only (recorded, never trained):
# the reward is the ballots', so a describe turn's gradient is noise, and it was a third of each update's tokens.
SMOL_GAME = {**DEMO_GAME, "train_describe": False}
SMOL_STEPS = 6  # weight updates of the SmolLM2 demo (8 took 15 min 10 s in fp32 on 2 cores; README, 'The CPU demo')
SMOL_EVAL = 12  # held-out games played before and after training


def smol_sets() -> list[str]:
    """SMOL_SETS with the weights' dtype this CPU runs fastest (bf16 only where it is native)."""
    from vibe_rl.engine.loader import cpu_bf16_native

    return [f"model.dtype={'bfloat16' if cpu_bf16_native() else 'float32'}", *SMOL_SETS]


def demo_plan(spec: dict) -> dict:
    """The seed spec's plan with the demo's game and reward applied."""
    spec["game"].update(DEMO_GAME)
    spec["reward"].update(DEMO_REWARD)
    return spec


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "sets":
        print(" ".join(f"--set {s}" for s in DEMO_SETS))
    elif what == "warm-start":
        print(" ".join(WARM_START))
    elif what == "steps":
        print(DEMO_STEPS)
    elif what == "smol-steps":
        print(SMOL_STEPS)
    elif what == "smol-eval":
        print(SMOL_EVAL)
    elif what == "reward":
        print(REWARD)
    elif what == "plan":
        raw = open(sys.argv[2], encoding="utf-8").read()
        spec = demo_plan(json.loads(raw[raw.index("{"):]))
        open(sys.argv[3], "w", encoding="utf-8").write(json.dumps(spec, indent=1))
    else:
        sys.exit("usage: demo_settings.py sets|warm-start|steps|smol-steps|smol-eval|reward|plan RAW OUT")
