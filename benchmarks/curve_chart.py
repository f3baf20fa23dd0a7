"""One chart of `benchmarks/learning_curve.py` runs: per eval round, the civilians' win rate against the
frozen initial model with its 95% Wilson interval (from the wins and games; left), and the share of civilian ballots on the spy (right).

Each input is that script's JSON (`--out`), or its stderr log (one JSON line per eval round, which a stopped
run still leaves); the label is `name=` before the path.

    python benchmarks/curve_chart.py individual=docs/results/h200_pool_individual.json \\
        group=docs/results/h200_pool_group.jsonl --out docs/results/h200_pool.png
    python benchmarks/curve_chart.py group=docs/results/h200_pool_group.jsonl \\
        individual=docs/results/h200_pool_individual.json seat=docs/results/h200_adv_seat.json \\
        role_baseline=docs/results/h200_adv_role_baseline.json zero_sum=docs/results/h200_adv_zero_sum.json \\
        --max-step 60 --out docs/results/h200_advantages.png \\
        --title "Who-is-Spy, SmolLM2-135M on one H200, seed 0: the five train.advantage modes, 60 updates each"
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def rounds_of(path: Path) -> list[dict]:
    text = path.read_text()
    try:
        return json.loads(text)["per_seed"][0]["rounds"]
    except (json.JSONDecodeError, KeyError):
        return [json.loads(line) for line in text.splitlines() if line.startswith('{"seed"')]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", metavar="NAME=PATH")
    ap.add_argument("--out", type=Path, required=True, help="PNG to write")
    ap.add_argument("--max-step", type=int, help="Draw the eval rounds up to this update only (runs of different lengths)")
    ap.add_argument("--title", default="Who-is-Spy, SmolLM2-135M on one H200: civilians vs the frozen initial spy")
    args = ap.parse_args()
    import matplotlib

    from vibe_rl.swarm.observe.winrate import wilson

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (win, acc) = plt.subplots(1, 2, figsize=(11, 4))
    for run in args.runs:
        name, _, path = run.rpartition("=")
        rounds = [r for r in rounds_of(Path(path)) if args.max_step is None or r["step"] <= args.max_step]
        steps = [r["step"] for r in rounds]
        rate = [r["civilian_win_rate"]["mean"] for r in rounds]
        bands = [wilson(round(r["civilian_win_rate"]["mean"] * r["civilian_win_rate"]["n"]), r["civilian_win_rate"]["n"])
                 for r in rounds]
        lo, hi = [b[0] for b in bands], [b[1] for b in bands]
        line, = win.plot(steps, rate, marker="o", label=f"{name or path} (n={rounds[0]['civilian_win_rate']['n']})")
        win.fill_between(steps, lo, hi, alpha=0.15, color=line.get_color())
        acc.plot(steps, [r["spy_ballot_share"] for r in rounds], marker="o", color=line.get_color(), label=name)
    win.set(xlabel="weight updates", ylabel="eval win rate (95% Wilson interval)", ylim=(-0.05, 1.0))
    acc.set(xlabel="weight updates", ylabel="civilian ballots on the spy", ylim=(0, 1.0))
    win.legend(), acc.legend()
    fig.suptitle(args.title, fontsize=10)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(json.dumps({"chart": str(args.out), "runs": len(args.runs)}))


if __name__ == "__main__":
    main()
