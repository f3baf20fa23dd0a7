"""The LLM rules-writing loop of the turn_based family, against the scripted local API stand-in: a game no
template covers (Race to Ten), a first answer whose tests fail, the failure sent back, a second that passes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.scripted_api import ScriptedAPI

from vibe_rl.scaffold.rules_writer import RulesWriteError, chat_for, write_rules

VIBE_RL = str(Path(sys.executable).parent / "vibe-rl")
SPEC = ("Train an agent for Race to Ten: 2 players take turns adding 1 or 2 to a shared counter that starts at 0; "
        "whoever brings the counter to exactly 10 wins. Model tiny, batch size 4, grpo_n 2.")

RULES = '''"""Rules of Race to Ten: players add 1 or 2 to a shared counter in turn; reaching exactly 10 wins."""

from dataclasses import dataclass, field

TITLE = "Race to Ten"
NUM_PLAYERS = 2
MAX_TURNS = 20
TARGET = 10


@dataclass
class State:
    num_players: int
    turn: int = 0
    history: list = field(default_factory=list)
    data: dict = field(default_factory=dict)
    winners: list | None = None


def new_game(seed: int, num_players: int = NUM_PLAYERS) -> State:
    return State(num_players=num_players, data={"counter": 0})


def current_player(state: State) -> int:
    return state.turn % state.num_players


def legal_actions(state: State, seat: int) -> list[str]:
    return [str(n) for n in (1, 2) if state.data["counter"] + n <= TARGET]


def observation(state: State, seat: int) -> str:
    return f"The counter is at {state.data['counter']}; reach exactly {TARGET} to win."


def apply_action(state: State, seat: int, action: str) -> None:
    if state.winners is not None or seat != current_player(state) or action not in legal_actions(state, seat):
        raise ValueError(f"illegal action {action!r} for seat {seat}")
    state.data["counter"] += int(action)
    state.history.append((seat, action))
    state.turn += 1
    if state.data["counter"] == TARGET:
        state.winners = [WINNER_OF(seat)]
    elif state.turn >= MAX_TURNS:
        state.winners = []
'''
TESTS = '''import pytest

from game_rules import apply_action, current_player, legal_actions, new_game


def test_reaching_ten_wins():
    state = new_game(1)
    for action in ["2", "2", "2", "2", "1"]:
        apply_action(state, current_player(state), action)
    assert state.data["counter"] == 9 and state.winners is None
    apply_action(state, current_player(state), "1")
    assert state.winners == [1]


def test_cannot_overshoot():
    state = new_game(1)
    for action in ["2", "2", "2", "2", "1"]:
        apply_action(state, current_player(state), action)
    assert legal_actions(state, current_player(state)) == ["1"]
    with pytest.raises(ValueError):
        apply_action(state, current_player(state), "2")
'''
BUGGY = f"### game_rules.py\n```python\n{RULES.replace('WINNER_OF(seat)', 'seat + 1')}```\n\n### test_game_rules.py\n```python\n{TESTS}```\n"
FIXED = f"### game_rules.py\n```python\n{RULES.replace('WINNER_OF(seat)', 'seat')}```\n\n### test_game_rules.py\n```python\n{TESTS}```\n"


@pytest.fixture
def project(tmp_path) -> Path:
    done = subprocess.run([VIBE_RL, "new", SPEC, "--family", "turn_based", "--planner", "offline", "--out", "p"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    return tmp_path / "p"


def test_failure_goes_back_and_the_second_answer_passes(project):
    lines: list[str] = []
    with ScriptedAPI([BUGGY, FIXED]) as api:
        rounds = write_rules(project, SPEC, chat_for("openai", "scripted", base_url=api.url, api_key="sk-test"),
                             max_rounds=3, log=lines.append)
    assert rounds == 2 and len(api.requests) == 2
    first, second = api.requests
    assert "Race to Ten" in first["messages"][1]["content"] and "### game_rules.py" in first["messages"][1]["content"]
    feedback = second["messages"][-1]["content"]
    assert "the rule tests failed" in feedback and "test_reaching_ten_wins" in feedback
    assert "state.winners = [seat]" in (project / "game_rules.py").read_text()
    assert lines[0].startswith("rules round 1: the rule tests failed") and "pass" in lines[1]
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_game_rules.py"],
                           cwd=project, capture_output=True, text=True, timeout=120)
    assert tests.returncode == 0, tests.stdout
    doctor = subprocess.run([VIBE_RL, "doctor", str(project)], capture_output=True, text=True, timeout=120)
    assert doctor.returncode == 0, doctor.stdout


def test_stops_after_k_rounds_showing_the_failing_test(project):
    with ScriptedAPI([BUGGY]) as api:
        with pytest.raises(RulesWriteError) as info:
            write_rules(project, SPEC, chat_for("openai", "scripted", base_url=api.url, api_key="sk-test"),
                        max_rounds=2, log=lambda line: None)
    assert len(api.requests) == 2
    message = str(info.value)
    assert "after 2 round(s)" in message and "test_reaching_ten_wins" in message and "--rules-rounds" in message


def test_answers_without_both_files_or_with_chinese_are_sent_back(project):
    chinese = FIXED.replace('TITLE = "Race to Ten"', 'TITLE = "抢十"')
    with ScriptedAPI(["no code here", chinese, FIXED]) as api:
        rounds = write_rules(project, SPEC, chat_for("openai", "scripted", base_url=api.url, api_key="sk-test"),
                             log=lambda line: None)
    assert rounds == 3
    assert "lacks game_rules.py, test_game_rules.py" in api.requests[1]["messages"][-1]["content"]
    assert "Chinese" in api.requests[2]["messages"][-1]["content"]


def _quoted_plan() -> str:
    """The plan an LLM answers first: the offline plan of SPEC with the offline spans as its quotes."""
    from vibe_rl.planner.offline import OfflinePlanner
    from vibe_rl.planner.review import review

    planner = OfflinePlanner()
    spec = planner.plan(SPEC, family="turn_based")
    rows = review(spec, SPEC, "offline", planner.read)
    return json.dumps({"plan": spec.model_dump(mode="json"),
                       "quotes": {r["field"]: r["span"] for r in rows if r["from"] == "spec" and r["span"] in SPEC}})


def test_cli_turn_based_with_an_llm_planner(tmp_path):
    with ScriptedAPI([_quoted_plan(), BUGGY, FIXED]) as api:
        env = {**os.environ, **api.env()}
        env.pop("ANTHROPIC_API_KEY", None)
        done = subprocess.run([VIBE_RL, "new", SPEC, "--family", "turn_based", "--planner", "openai", "--out", "p"],
                              capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "planner: openai;" in done.stdout and "(Plan it as the turn_based family.)" in json.dumps(api.requests[0])
    assert "rules round 2: the rule tests, imports and doctor pass" in done.stdout
    assert "sk-test-secret" not in done.stdout + done.stderr
    spec = json.loads((tmp_path / "p" / "task_spec.json").read_text())
    assert (spec["game"]["num_players"], spec["training"]["batch_size"], spec["training"]["grpo_n"]) == (2, 4, 2)
