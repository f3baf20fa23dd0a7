"""Provenance of a plan (vibe_rl.planner.review), background sentences, and doctor's plausibility findings.

Every field of a plan names its source: the span of the spec it was read from, or the default with its rule,
or (for an LLM plan) where the spec states the value. `vibe-rl new` prints that table, keeps it in the project
(plan_review.json) and never waits for an answer off a terminal; doctor quotes the source span of an
implausible value."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_corpus import CASES, text_of

from vibe_rl.errors import PlannerError
from vibe_rl.planner.background import blank_background
from vibe_rl.planner.offline import OfflinePlanner
from vibe_rl.planner.review import REVIEW_FILE, review, trained_but_static
from vibe_rl.scaffold.doctor import diagnose

VIBE_RL = str(Path(sys.executable).parent / "vibe-rl")
CASE = {c["id"]: c for c in CASES}


def rows_of(text: str, family: str | None = None) -> tuple[object, dict[str, dict]]:
    planner = OfflinePlanner()
    spec = planner.plan(text, family=family)
    return spec, {r["field"]: r for r in review(spec, text, "offline", planner.read)}


def test_every_corpus_field_names_a_source_that_is_in_the_text():
    for case in CASES:
        if "error" in case:
            continue
        planner = OfflinePlanner()
        spec = planner.plan(text_of(case), family=case.get("family"))
        for row in review(spec, text_of(case), "offline", planner.read):
            assert row["from"] in ("spec", "default"), (case["id"], row)
            if row["from"] == "spec":
                span = row["span"].removesuffix(" (as read)")
                assert all(part in planner.read.text for part in span.split(" | ")), (case["id"], row)
            else:
                assert row["rule"], (case["id"], row)


def test_a_number_in_a_background_sentence_is_no_source():
    _, rows = rows_of(CASE["i26_every_15_steps_lost_run"]["spec"])
    assert rows["training.save_freq"]["from"] == "spec" and "3" in rows["training.save_freq"]["span"]
    assert "15" not in rows["training.save_freq"]["span"]
    assert rows["reward.loss"]["from"] == "default"
    _, rows = rows_of(CASE["i26_wechat_zh_spy_background_save"]["spec"])
    assert rows["training.save_freq"]["span"] == "这次每 5 步保存"
    assert rows["training.batch_size"]["span"] == "bs 16 吧"


def test_role_table_rows_are_the_source_of_counts_and_wiring():
    _, rows = rows_of(CASE["i26_markdown_role_table_wolves"]["spec"])
    assert rows["game.roles"]["from"] == "spec" and "2 werewolf" in rows["game.roles"]["span"]
    assert rows["wire.agent_roll.werewolf"]["span"].startswith("2 werewolf: /m/qwen7b")
    assert rows["wire.agent_roll.hunter"]["from"] == "default"


def test_an_llm_plan_names_where_the_spec_states_each_value():
    text = "who is spy, 6 players, model /m/q7b, lr 2e-6"
    spec = OfflinePlanner().plan(text)  # stands in for an LLM's answer: the same TaskSpec
    rows = {r["field"]: r for r in review(spec, text, "openai")}
    assert rows["servers.0.model_path"] == {"field": "servers.0.model_path", "value": "/m/q7b", "from": "llm",
                                            "span": "model /m/q7b", "rule": None}
    assert rows["game.num_players"]["span"] == "6 players"
    assert rows["training.batch_size"]["span"] is None
    assert rows["training.batch_size"]["rule"] == "not stated in the spec: check it"


def test_background_is_blanked_in_place_and_noted():
    text = "Last year I tried PPO with 10 players on another project. This time: who is spy, 6 players."
    blanked, notes = blank_background(text)
    assert len(blanked) == len(text) and "PPO" not in blanked and "6 players" in blanked
    assert notes and "Read as background" in notes[0]
    spec = OfflinePlanner().plan(text)  # PPO in a background sentence refuses nothing
    assert spec.game["num_players"] == 6 and spec.unparsed == []
    with pytest.raises(PlannerError, match="PPO"):  # ... but this training's PPO is still refused
        OfflinePlanner().plan("who is spy with PPO, 6 players")


def test_a_role_the_spec_trains_but_the_plan_leaves_static():
    spec = OfflinePlanner().plan("Werewolves: only the seer is trainable, on /m/q7b, 8 GPUs")
    assert trained_but_static(spec, "Werewolves. The wolves are trained and the seer too") == [
        ("agent_roll", "werewolf", "The wolves are trained and the seer too")]
    assert trained_but_static(spec, "狼人杀，狼人可训练")[0][1] == "werewolf"
    assert trained_but_static(spec, "Werewolves: the wolves are not trained") == []
    assert trained_but_static(spec, "训练狼人杀的预言家") == []  # the game's name is no role


def new(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([VIBE_RL, "new", *args], capture_output=True, text=True, cwd=cwd, timeout=120,
                          stdin=subprocess.DEVNULL)


def test_new_prints_the_review_table_and_keeps_it_without_waiting(tmp_path):
    spec = "werewolves, 9 players, werewolves and seer trained on /m/q7b, 8 GPUs, lr 0.01, max tokens 8, winners get 100"
    done = new(spec, "--planner", "offline", "--out", str(tmp_path / "p"), cwd=tmp_path)  # stdin is no terminal
    assert done.returncode == 0, done.stderr
    assert "field" in done.stdout and "spec: 'lr 0.01'" in done.stdout and REVIEW_FILE in done.stdout
    kept = json.loads((tmp_path / "p" / REVIEW_FILE).read_text(encoding="utf-8"))
    assert kept["planner"] == "offline" and kept["spec"] == spec
    assert {r["field"]: r["span"] for r in kept["rows"]}["training.max_tokens"] == "max tokens 8"
    found = {f.message for f in diagnose(tmp_path / "p")}
    assert any("training.lr is 0.01 (from the spec: 'lr 0.01')" in m for m in found)
    assert any("training.max_tokens is 8 (from the spec: 'max tokens 8')" in m for m in found)
    assert any("reward.win is 100 (from the spec: 'winners get 100')" in m for m in found)
    again = new(spec, "--planner", "offline", "--out", str(tmp_path / "q"), "--yes", cwd=tmp_path)
    assert again.returncode == 0, again.stderr


def test_doctor_refuses_a_loss_above_the_win(tmp_path):
    done = new("who is spy, 6 players, model /m/q7b", "--planner", "offline", "--out", str(tmp_path / "p"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    path = tmp_path / "p" / "task_spec.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["reward"].update(win=0.0, loss=1.0)
    path.write_text(json.dumps(data), encoding="utf-8")
    errors = [f.message for f in diagnose(tmp_path / "p") if f.level == "error"]
    assert any("reward.loss (1, from default: Reward not fully given" in m and "learns to lose" in m for m in errors)


def test_turn_based_learner_seat_and_draw_render(tmp_path):
    spec = CASE["i26_turn_based_ttt_draw_seat"]["spec"]
    done = new("--family", "turn_based", spec, "--planner", "offline", "--out", str(tmp_path / "p"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run = (tmp_path / "p" / "agent_run.py").read_text(encoding="utf-8")
    assert "DRAW = 0.0" in run and "LEARNER_SEAT = 1" in run
    assert [f for f in diagnose(tmp_path / "p") if f.level == "error"] == []
    drawn = new("--family", "turn_based", "Chess, win 1, loss 0, a draw gives 3", "--planner", "offline", "--out",
                str(tmp_path / "q"), cwd=tmp_path)
    assert drawn.returncode == 0, drawn.stderr
    assert any("game.draw_reward is 3 (from the spec: 'a draw gives 3')" in f.message for f in diagnose(tmp_path / "q"))
    with pytest.raises(PlannerError, match="seat 5, but the game has 2 seats"):
        OfflinePlanner().plan("Chess, the learner sits in seat 5", family="turn_based")


def test_new_asks_to_confirm_on_a_terminal_and_writes_nothing_on_no(tmp_path):
    import os
    import pty

    out = tmp_path / "p"
    pid, fd = pty.fork()
    if pid == 0:  # the child: stdin and stdout are the pseudo-terminal
        os.chdir(tmp_path)
        os.execv(VIBE_RL, [VIBE_RL, "new", "who is spy, 6 players", "--planner", "offline", "--out", str(out)])
    seen = b""
    while b"Write the project" not in seen:
        seen += os.read(fd, 4096)
    os.write(fd, b"n\n")
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 1 and b"nothing written" in seen
    assert not out.exists()


def test_an_edited_plan_keeps_the_sources_of_the_values_it_did_not_change(tmp_path):
    project = tmp_path / "p"
    assert new("who is spy, 6 players, lr 2e-6, model /m/q7b", "--planner", "offline", "--out", str(project),
               cwd=tmp_path).returncode == 0
    path = project / "task_spec.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["training"]["batch_size"] = 8
    path.write_text(json.dumps(data), encoding="utf-8")
    done = new("--plan", str(project), "--out", str(project), "--force", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    kept = json.loads((project / REVIEW_FILE).read_text(encoding="utf-8"))
    rows = {r["field"]: r for r in kept["rows"]}
    assert rows["training.lr"]["from"] == "spec" and rows["training.lr"]["span"] == "lr 2e-6"
    assert rows["training.batch_size"] == {"field": "training.batch_size", "value": "8", "from": "plan", "span": None,
                                           "rule": "edited in the plan file (was 16)"}
    assert kept["spec"].startswith("who is spy")
