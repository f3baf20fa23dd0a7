"""Pure text -> Diagnosis: what went wrong in a pane log or a status snapshot.

Nothing here touches tmux, HTTP or the disk; the watcher feeds it text and JSON.
The kinds are few and fixed so the fix loop can count repeats by `signature`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# kind -> what to try (the static part of every suggestion)
SUGGESTIONS = {
    "traceback": "Fix the error at the file and line shown, then rerun.",
    "empty_task_id": (
        "Every episode must carry a unique, non-empty task_id (the GRPO group key): build tasks with "
        "Task(task_id=str(seed), ...) where seed is the episode's seed from the dataset."
    ),
    "repeated_task_id": (
        "All episodes land in one task: task_id is constant. Give each task its own id (e.g. its seed) "
        "and reuse it only for that task's grpo_n repeats."
    ),
    "episode_failures": "Episodes keep failing on a service error: the message names the part (a static model's "
                        "URL or key env var, a model name, a server); fix that setting, then rerun.",
    "oom": "Out of memory: lower train.batch_size / train.micro_batch_size / model.max_model_len, "
           "enable LoRA (model.lora.rank=8), or give the server more GPUs.",
    "nan_loss": "The loss became NaN: lower train.lr, keep train.max_grad_norm set, check rewards are finite.",
    "port_in_use": "The port is taken: stop the other process (vibe-rl run DIR --stop) or pick another port.",
    "server_not_ready": "The swarm server never answered /healthz: read its pane log for the reason.",
    "client_died": "The client exited: read its pane log; rerun with the fix.",
    "trace_mismatch": "A player's calls went to the wrong model: route each role to its team's "
                      "server/model (see the TaskSpec roles) and tag calls with user='<role>:<player_id>'.",
    "timeout": "Nothing failed visibly, but the target step was not reached in time: raise --timeout or "
               "lower train.batch_size / train.grpo_n.",
}

_TB_HEAD = "Traceback (most recent call last):"
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>.+))?$')
_EXC = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Fault)|[A-Za-z_][\w.]*Error)"
                  r"(?::\s?(?P<msg>.*))?$")
_OOM = re.compile(r"CUDA out of memory|OutOfMemoryError|\bMemoryError\b|Killed\s*$|oom-kill|"
                  r"Cannot allocate memory", re.M)
_NAN = re.compile(r"\bloss\b[^\n]{0,40}?[=:]\s*'?(nan|-?inf)\b|\bNaN loss\b|loss is (nan|not finite)",
                  re.I)
_PORT = re.compile(r"address already in use|\[Errno 98\]|port \d+ is (already )?in use", re.I)
_EMPTY_TASK = re.compile(r"task_id is empty|task_id must be non-empty|empty task_id", re.I)
# run_in_flight logs a failed episode without its traceback: "item failed after 3 attempts: NameError: ..."
_ITEM_FAILED = re.compile(r"item failed after \d+ attempts?: (?P<type>[A-Za-z_][\w.]*): ?(?P<msg>.*)")
_TRANSIENT = re.compile(r"Connection|Timeout|RateLimit|APIStatus|InternalServer|ServiceUnavailable|Swarm|HTTP")
EXIT_MARK = "__VIBE_RL_EXIT__"
_EXIT = re.compile(EXIT_MARK + r" (\d+)")


@dataclass
class Frame:
    file: str
    line: int
    func: str = ""


@dataclass
class Traceback:
    frames: list[Frame]
    exc_type: str
    message: str
    text: str


@dataclass
class Diagnosis:
    """One failure: what (kind), where (file/line), evidence (excerpt) and what to do (suggestion)."""

    kind: str
    summary: str
    source: str = ""
    file: str | None = None
    line: int | None = None
    excerpt: str = ""
    suggestion: str = ""
    players: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.suggestion:
            self.suggestion = SUGGESTIONS.get(self.kind, "")

    @property
    def signature(self) -> str:
        """Equal for the same failure seen again (used by the 'same failure 3 times' stop)."""
        where = f"{Path(self.file).name}:{self.line}" if self.file else ""
        first = self.summary.split(":")[0] if self.kind == "traceback" else ""
        roles = sorted({p.split(":")[0] for p in self.players})  # player ids are reshuffled every episode
        return "|".join([self.kind, self.source, where, first, ",".join(roles)])

    def render(self) -> str:
        lines = [f"[{self.kind}] {self.summary}"]
        if self.source:
            lines.append(f"  seen in: {self.source}")
        if self.file:
            lines.append(f"  at: {self.file}:{self.line}")
        if self.players:
            lines.append(f"  players: {', '.join(self.players)}")
        if self.excerpt:
            lines.append("  evidence:\n" + "\n".join("    " + x for x in self.excerpt.strip().splitlines()[-25:]))
        if self.suggestion:
            lines.append(f"  suggested fix: {self.suggestion}")
        return "\n".join(lines)


def parse_tracebacks(text: str) -> list[Traceback]:
    """Every Python traceback in `text`, oldest first."""
    out: list[Traceback] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if _TB_HEAD not in lines[i]:
            i += 1
            continue
        start, frames, i = i, [], i + 1
        while i < len(lines):
            m = _FRAME.match(lines[i])
            if m:
                frames.append(Frame(m["file"], int(m["line"]), (m["func"] or "").strip()))
                i += 1
                continue
            stripped = lines[i].strip()
            em = _EXC.match(stripped)
            if em and not lines[i].startswith((" ", "\t")):
                # a chained traceback's exception line, or the final one
                msg = [em["msg"] or ""]
                j = i + 1
                while j < len(lines) and lines[j].strip() and _TB_HEAD not in lines[j] and \
                        not lines[j].startswith(("During handling", "The above exception", EXIT_MARK)) and \
                        len(msg) < 12:
                    msg.append(lines[j].strip())
                    j += 1
                out.append(Traceback(frames, em["type"], "\n".join(m for m in msg if m).strip(),
                                     "\n".join(lines[start:j])))
                i = j
                break
            if _TB_HEAD in lines[i]:
                break
            i += 1
    return out


def _pick_frame(tb: Traceback, project_dir: str | Path | None) -> Frame | None:
    """The deepest frame in the project; else the deepest outside site-packages/stdlib; else the last."""
    if not tb.frames:
        return None
    if project_dir is not None:
        root = str(Path(project_dir).resolve())
        mine = [f for f in tb.frames if str(Path(f.file).resolve()).startswith(root + "/")
                and "/.venv" not in f.file]
        if mine:
            return mine[-1]
    user = [f for f in tb.frames if "site-packages" not in f.file and "/lib/python" not in f.file
            and not f.file.startswith("<")]
    return (user or tb.frames)[-1]


def diagnose_text(text: str, source: str = "", project_dir: str | Path | None = None) -> Diagnosis | None:
    """The most telling failure in one pane's output, or None when it looks healthy."""
    if not text:
        return None
    m = _PORT.search(text)
    if m:
        return Diagnosis("port_in_use", "a port is already in use", source, excerpt=_around(text, m.start()))
    m = _OOM.search(text)
    if m:
        return Diagnosis("oom", "out of memory", source, excerpt=_around(text, m.start()))
    m = _NAN.search(text)
    if m:
        return Diagnosis("nan_loss", "the training loss is NaN/inf", source, excerpt=_around(text, m.start()))
    tbs = parse_tracebacks(text)
    if tbs:
        tb = tbs[-1]
        frame = _pick_frame(tb, project_dir)
        if _EMPTY_TASK.search(tb.text):
            return Diagnosis("empty_task_id", "episodes are reported with an empty task_id", source,
                             frame.file if frame else None, frame.line if frame else None, tb.text)
        head = tb.message.splitlines()[0] if tb.message else ""
        return Diagnosis("traceback", f"{tb.exc_type}: {head}".rstrip(": "), source,
                         frame.file if frame else None, frame.line if frame else None, tb.text,
                         suggestion=_traceback_hint(tb, frame))
    failed = list(_ITEM_FAILED.finditer(text))
    hard = [m for m in failed if not _TRANSIENT.search(m["type"])]
    if hard or len(failed) >= 3:
        m = (hard or failed)[0]
        if _EMPTY_TASK.search(m["msg"]):
            return Diagnosis("empty_task_id", "episodes are reported with an empty task_id", source,
                             excerpt=_around(text, m.start()))
        if not hard:
            return Diagnosis("episode_failures", f"{len(failed)} episodes failed: {m['type']}: {m['msg'].strip()}",
                             source, excerpt=_around(text, m.start()))
        tb = Traceback([], m["type"], m["msg"].strip(), m[0])
        file, line = locate_name(m["msg"], project_dir) if m["type"].endswith("NameError") else (None, None)
        frame = Frame(file, line) if file else None
        return Diagnosis("traceback", f"{m['type']}: {m['msg'].strip()} ({len(failed)} episodes failed)", source,
                         file, line, _around(text, m.start()), suggestion=_traceback_hint(tb, frame))
    m = _EMPTY_TASK.search(text)
    if m:
        return Diagnosis("empty_task_id", "episodes are reported with an empty task_id", source,
                         excerpt=_around(text, m.start()))
    return None


def locate_name(message: str, project_dir: str | Path | None) -> tuple[str | None, int | None]:
    """Where an undefined name is used in the project's .py files (for errors logged without a traceback)."""
    m = re.search(r"name '([^']+)' is not defined", message)
    if not m or project_dir is None or not Path(project_dir).is_dir():
        return None, None
    use = re.compile(rf"(?<![\w.]){re.escape(m[1])}\b")
    for path in sorted(Path(project_dir).glob("*.py")):
        for no, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            code = line.split("#", 1)[0]
            if use.search(code) and not re.match(rf"\s*(def|class)\s+{re.escape(m[1])}\b", code):
                return str(path.resolve()), no
    return None, None


def exit_code(text: str) -> int | None:
    """The exit status the launcher printed after the command, if it has exited."""
    found = _EXIT.findall(text)
    return int(found[-1]) if found else None


def diagnose_status(status: dict[str, Any], source: str = "") -> Diagnosis | None:
    """Failures visible only in the server's status: bad task ids in the pool, NaN loss, server errors."""
    pool = status.get("pool") or {}
    tasks = status.get("tasks") or []
    episodes = int(pool.get("completed_episodes") or 0)
    n_tasks = int(pool.get("completed_tasks") or 0)
    grpo_n = max(int(pool.get("grpo_n") or 1), 1)
    excerpt = _pool_excerpt(pool, tasks)
    if any(str(t.get("task_id", "x")).strip() == "" for t in tasks):
        return Diagnosis("empty_task_id", f"{episodes} episodes are pooled under an empty task_id", source,
                         excerpt=excerpt)
    # The pool grows in episodes but not in tasks: one task holds far more than its grpo_n.
    biggest = max((int(t.get("episodes") or 0) for t in tasks), default=0)
    if episodes >= 3 * grpo_n and biggest >= 3 * grpo_n and n_tasks <= 1:
        return Diagnosis("repeated_task_id", f"{episodes} episodes but only {max(n_tasks, 1)} task "
                         f"(grpo_n={grpo_n}): every episode reuses one task_id", source, excerpt=excerpt)
    nan = nan_update(status, source)
    if nan is not None:
        return nan
    for err in status.get("errors") or []:
        d = diagnose_text(str(err), source)
        if d is not None and d.kind != "traceback":
            return d
    return None


def nan_update(status: dict[str, Any], source: str = "") -> Diagnosis | None:
    """A weight update whose loss was NaN/inf (or that the trainer skipped as non-finite)."""
    last = status.get("last_update") or {}
    loss = last.get("loss")
    skipped = last.get("nan_skipped_total") or last.get("nan_skipped") or 0
    if (isinstance(loss, (int, float)) and not math.isfinite(loss)) or skipped:
        return Diagnosis("nan_loss", f"step {last.get('step')}: loss {loss}, non-finite steps skipped: {skipped}",
                         source, excerpt=str(last))
    return None


def _traceback_hint(tb: Traceback, frame: Frame | None) -> str:
    where = f" at {frame.file}:{frame.line}" if frame else ""
    if tb.exc_type.endswith("NameError"):
        m = re.search(r"name '([^']+)' is not defined", tb.message)
        if m:
            return f"`{m[1]}` is not defined{where}: define or import it, or fix the typo."
    if tb.exc_type.endswith(("ModuleNotFoundError", "ImportError")):
        return f"{tb.message}{where}: install the package into the session's venv or fix the import."
    return f"{tb.exc_type}{where}: {SUGGESTIONS['traceback']}"


def _around(text: str, pos: int, before: int = 8, after: int = 4) -> str:
    lines = text.splitlines()
    row = text.count("\n", 0, pos)
    return "\n".join(lines[max(0, row - before): row + after + 1])


def _pool_excerpt(pool: dict[str, Any], tasks: list[dict[str, Any]]) -> str:
    rows = [f"completed_episodes={pool.get('completed_episodes')} completed_tasks={pool.get('completed_tasks')} "
            f"target_tasks={pool.get('target_tasks')} grpo_n={pool.get('grpo_n')}"]
    for t in tasks[:5]:
        rows.append(f"task_id={t.get('task_id')!r} episodes={t.get('episodes')} reward_mean={t.get('reward_mean')}")
    return "\n".join(rows)
