"""What a run did, printed at the end and saved to DIR/logs/autopilot-report.json."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Attempt:
    """One diagnosis and what was done about it."""

    diagnosis: str  # rendered Diagnosis
    kind: str
    action: str  # "fixed <commit>", "refused: ...", "no LLM configured", ...


@dataclass
class RunReport:
    project: str
    mode: str
    target_step: int  # updates this run had to make (per server)
    until: str = "first-step"
    outcome: str = "running"  # "success" | "failed" | "stopped"
    seconds_to_first_step: float | None = None  # from `vibe-rl run` start to global_step >= 1
    seconds_to_target: float | None = None
    first_step_unix: float | None = None  # wall-clock time the watcher saw global_step >= 1
    global_step: int = 0
    start_steps: dict[str, int] = field(default_factory=dict)  # server -> resumed checkpoint step (0: scratch)
    new_updates: dict[str, int] = field(default_factory=dict)  # server -> updates made by this run
    signal_steps: dict[str, int | None] = field(default_factory=dict)  # first non-zero-gradient update
    job: dict[str, str] = field(default_factory=dict)  # server -> the effective job it runs, in words
    reward_mean: float | None = None  # one server: its reward so far; several: the mean of `rewards`
    rewards: dict[str, float | None] = field(default_factory=dict)  # server -> its reward so far (own scale)
    episodes: int = 0
    eval_win_rates: dict[str, str] = field(default_factory=dict)  # server -> its latest eval win rate, in words
    sessions: list[str] = field(default_factory=list)
    attach: list[str] = field(default_factory=list)
    overwatch: list[str] = field(default_factory=list)
    traces: list[str] = field(default_factory=list)  # how to open each server's trace viewer (live, then offline)
    venv_seconds: dict[str, float] = field(default_factory=dict)
    venv_created: dict[str, bool] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    audit: str = ""
    attempts: list[Attempt] = field(default_factory=list)
    final_diagnosis: str = ""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunReport:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["attempts"] = [Attempt(**a) for a in known.get("attempts") or []]
        return cls(**known)

    def save(self, project_dir: Path) -> Path:
        path = Path(project_dir) / "logs" / "autopilot-report.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self), indent=2, default=str))
        return path

    def render(self) -> str:
        lines = []
        resumed = {k: v for k, v in self.start_steps.items() if v}
        if self.outcome == "success":
            made = ", ".join(f"{k} {v}" for k, v in self.new_updates.items())
            signal = [k for k, v in self.signal_steps.items() if v is not None]
            head = "training has started" if signal else "weight updates made, but every one had zero gradient"
            lines.append(f"[vibe-rl] {head}: global step {self.global_step} in mode {self.mode}; "
                         f"updates made by this run: {made} (--until {self.until})")
            if resumed:
                lines.append("  resumed from a checkpoint (" + ", ".join(f"{k} at step {v}" for k, v in resumed.items())
                             + "); those earlier steps are not counted")
            for k, v in self.signal_steps.items():
                if v is not None:
                    lines.append(f"  {k}: first update with a non-zero gradient: step {v}")
            if self.seconds_to_first_step is not None:
                lines.append(f"  time from start to this run's first weight update: {self.seconds_to_first_step:.1f} s")
            reward = (", ".join(f"{k} {_shown(v)}" for k, v in self.rewards.items()) if len(self.rewards) > 1
                      else _shown(self.reward_mean))  # each server's reward is on its own scale: never averaged
            lines.append(f"  reward so far: {reward} (latest update; {self.episodes} episodes completed)")
        else:
            lines.append(f"[vibe-rl] run {self.outcome}: this run did not make {self.target_step} update(s) "
                         f"(--until {self.until})")
            if resumed:
                lines.append("  resumed from a checkpoint (" + ", ".join(f"{k} at step {v}" for k, v in resumed.items())
                             + ")")
            if self.final_diagnosis:  # shown in full above; here without the evidence block
                lines += [x for x in self.final_diagnosis.splitlines() if not x.startswith("    ")
                          and x.strip() != "evidence:"]
        lines += [f"  {k} eval win rate: {v}" for k, v in self.eval_win_rates.items()]
        lines += [f"  {k} runs: {v}" for k, v in self.job.items()]
        if self.audit:
            lines.append("  " + self.audit.replace("\n", "\n  "))
        for i, a in enumerate(self.attempts, 1):
            lines.append(f"  attempt {i}: [{a.kind}] -> {a.action}")
        if self.sessions:
            lines.append("  tmux sessions: " + ", ".join(self.sessions))
            lines += [f"  attach: {hint}" for hint in self.attach]
        lines += [f"  overwatch: {cmd}" for cmd in self.overwatch]
        lines += [f"  traces: {cmd}" for cmd in self.traces]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def _shown(reward: float | None) -> str:
    return "n/a" if reward is None else f"{reward:.3f}"


def reward_so_far(statuses: dict[str, dict[str, Any]]) -> tuple[dict[str, float | None], int]:
    """Per server, the mean reward of its latest weight update (else of its pooled tasks); and the completed
    episodes of all servers. Servers are kept apart: each one's reward is on its own scale (spies vs civilians)."""
    rewards, episodes = {}, 0
    for name, st in statuses.items():
        last = st.get("last_update") or {}
        episodes += int((st.get("pool") or {}).get("completed_episodes") or 0) + int(last.get("episodes") or 0)
        if isinstance(last.get("reward_mean"), (int, float)):
            rewards[name] = float(last["reward_mean"])
            continue
        pooled = [(int(t.get("episodes") or 0), t.get("reward_mean")) for t in st.get("tasks") or []]
        pooled = [(k, r) for k, r in pooled if k and isinstance(r, (int, float))]
        n = sum(k for k, _ in pooled)
        rewards[name] = sum(k * r for k, r in pooled) / n if n else None
    return rewards, episodes


def eval_win_rates(updates: dict[str, list[dict[str, Any]]]) -> dict[str, str]:
    """Per server, its newest eval win rate with the 95% Wilson interval (`swarm.observe.winrate`), in words; a
    server whose eval episodes reported no `win` (or that played none) is left out."""
    from vibe_rl.swarm.observe import winrate

    found = {name: winrate.latest(rows) for name, rows in updates.items()}
    return {name: winrate.describe(row) for name, row in found.items() if row is not None}


def flat_update_notes(statuses: dict[str, dict[str, Any]]) -> list[str]:
    """Say so when a server's latest update had equal rewards in every GRPO group: zero advantages, so the
    optimiser step ran but moved no weight. Typical of a random (tiny) model that never wins yet."""
    notes = []
    for name, st in statuses.items():
        last = st.get("last_update") or {}
        groups = int(last.get("groups") or 0)
        if groups and int(last.get("all_equal_groups") or 0) == groups:
            notes.append(f"{name}: every GRPO group of update {int(last.get('step') or 0)} had equal rewards (mean "
                         f"{last.get('reward_mean')}), so its advantages and gradient were zero; learning starts "
                         "once episodes of one task get different rewards (more steps, a warmer model, or a "
                         "denser reward)")
    return notes
