"""An LLM writes the rules of an unknown game into a rendered turn_based project, and its tests.

Loop (at most `max_rounds`): send the spec and the skeleton's two files; the answer carries the new
`game_rules.py` and `test_game_rules.py` as fenced code blocks, each under a `### <file>` line; write them,
then check the project: the rule tests (pytest), the modules agent_run.py and mock_dataset.py import and
the dataset regenerates, and `vibe-rl doctor` finds no error. A failure goes back to the LLM as the next
message. The loop ends with a project that passes, or raises RulesWriteError showing the last failure
(the files of the last round stay in place for a person to finish).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vibe_rl.errors import PlannerError
from vibe_rl.extras import require

FILES = ("game_rules.py", "test_game_rules.py")
_BLOCK = re.compile(r"^#+\s*`?([\w.]+\.py)`?\s*\n+```(?:python|py)?\s*\n(.*?)\n```", re.MULTILINE | re.DOTALL)
_CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")
SYSTEM = """You write the rules of a turn-based game for a vibe-rl training project, in Python, English only
(no Chinese characters anywhere in code, comments or strings). Rewrite game_rules.py so that it implements the
game of the spec and keeps its interface exactly: TITLE, NUM_PLAYERS, MAX_TURNS, the State dataclass (num_players,
turn, history, data, winners) and the functions new_game(seed, num_players), current_player(state),
legal_actions(state, seat) -> list[str], observation(state, seat) -> str and apply_action(state, seat, action)
(raises ValueError on an illegal action; sets state.winners, a list of seats, [] for a draw, when the game
ends; a game must end within MAX_TURNS turns). Rewrite test_game_rules.py with pytest tests of the spec's rules.
Answer with exactly two fenced python code blocks, each preceded by a line `### game_rules.py` or
`### test_game_rules.py`, and nothing else."""


class RulesWriteError(PlannerError):
    """The LLM's rules did not pass the project's checks within the allowed rounds."""


def check_project(project: Path, python: str = sys.executable) -> str | None:
    """None when the rules pass; else the failure text (pytest output, import error or doctor findings)."""
    from vibe_rl.scaffold.doctor import diagnose

    for path in (project / f for f in FILES):
        match = _CJK.search(path.read_text(encoding="utf-8"))
        if match:
            return f"{path.name} contains Chinese text ({match.group()!r}): code must be English only."
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    steps = [([python, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", FILES[1]], "the rule tests"),
             ([python, "-c", "import agent_run, mock_dataset"], "importing agent_run and mock_dataset"),
             ([python, "mock_dataset.py"], "regenerating the mock dataset")]
    for cmd, what in steps:
        try:
            done = subprocess.run(cmd, cwd=project, capture_output=True, text=True, timeout=180, env=env)
        except subprocess.TimeoutExpired:
            return f"{what} did not finish in 180 s (an endless loop in the rules?)."
        if done.returncode != 0:
            return f"{what} failed (exit {done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}"
    errors = [str(f) for f in diagnose(project) if f.level == "error"]
    return "vibe-rl doctor found errors:\n" + "\n".join(errors) if errors else None


def parse_files(answer: str) -> dict[str, str]:
    files = {name: body + "\n" for name, body in _BLOCK.findall(answer) if name in FILES}
    missing = [f for f in FILES if f not in files]
    if missing:
        raise ValueError(f"the answer lacks {', '.join(missing)}: give both files as ```python blocks, each under "
                         f"a '### <file name>' line")
    return files


def write_rules(project: str | Path, spec_text: str, chat: Callable[[list[dict[str, str]]], str],
                max_rounds: int = 3, log: Callable[[str], None] = print) -> int:
    """Run the loop; returns the number of rounds used. `chat(messages)` answers the conversation."""
    project = Path(project)
    current = "\n\n".join(f"### {name}\n```python\n{(project / name).read_text(encoding='utf-8')}```" for name in FILES)
    messages = [{"role": "user", "content": f"The spec:\n\n{spec_text.strip()}\n\nThe current files:\n\n{current}"}]
    failure = "no answer"
    for round_ in range(1, max_rounds + 1):
        answer = chat(messages)
        messages.append({"role": "assistant", "content": answer})
        try:
            for name, text in parse_files(answer).items():
                (project / name).write_text(text, encoding="utf-8")
            failure = check_project(project)
        except ValueError as exc:
            failure = str(exc)
        if failure is None:
            log(f"rules round {round_}: the rule tests, imports and doctor pass")
            return round_
        log(f"rules round {round_}: {failure.splitlines()[0]}")
        messages.append({"role": "user", "content": f"That does not pass yet:\n\n{failure}\n\nAnswer with both "
                                                    "files again, corrected."})
    raise RulesWriteError(f"The LLM's rules for {project} still fail after {max_rounds} round(s). Last failure:\n"
                          f"{failure}\nThe last files are in place: fix {FILES[0]} / {FILES[1]} by hand and run "
                          f"`python -m pytest {FILES[1]}` and `vibe-rl doctor {project}`, or rerun with more "
                          "--rules-rounds.")


def chat_for(planner: str, model: str | None = None, **client_kwargs: Any) -> Callable[[list[dict[str, str]]], str]:
    """A plain-text chat function over the official SDK of `planner` ('openai' or 'anthropic')."""
    model = model or os.environ.get("VIBE_RL_PLANNER_MODEL")
    if planner == "openai":
        client = require("openai", "the openai rules writer").OpenAI(**client_kwargs)

        def ask(messages: list[dict[str, str]]) -> str:
            reply = client.chat.completions.create(model=model or "gpt-4o",
                                                   messages=[{"role": "system", "content": SYSTEM}, *messages])
            return reply.choices[0].message.content or ""
        return ask
    if planner == "anthropic":
        client = require("anthropic", "the anthropic rules writer").Anthropic(**client_kwargs)

        def ask(messages: list[dict[str, str]]) -> str:
            reply = client.messages.create(model=model or "claude-sonnet-4-5", max_tokens=8192, system=SYSTEM,
                                           messages=messages)
            return "".join(getattr(block, "text", "") for block in reply.content)
        return ask
    raise PlannerError(f"No LLM rules writer for planner {planner!r}: use --planner openai or anthropic "
                       "(with its API key), or write game_rules.py by hand.")
