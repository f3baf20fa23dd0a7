"""What a researcher reads in projects rendered from fresh specs: the readme's static-model line says where the
URL and key come from and when the server falls back to a frozen local copy (never `$None`), and the
werewolves readme and agent_run.py describe the trainable teams the spec asked for (one side or two)."""

from __future__ import annotations

from pathlib import Path

from vibe_rl.planner.offline import OfflinePlanner
from vibe_rl.scaffold import render_project


def render(spec_text: str, out: Path) -> Path:
    render_project(OfflinePlanner().plan(spec_text), out)
    return out


def static_line(project: Path) -> str:
    readme = (project / "readme.md").read_text()
    return readme.split("## Static models", 1)[1].strip().splitlines()[0]


def test_static_model_lines_for_no_url_an_env_url_and_a_fixed_url(tmp_path):
    local = render("Who is spy with 5 players, 1 spy; the civilians train against a static opponent.", tmp_path / "a")
    assert static_line(local) == ("- `opponent`: no URL: the server serves a frozen local copy of the trainable "
                                  "model under this name.")
    by_env = render("Who is the spy, 6 players. The civilians train; the spies are played by qwen-plus served at the "
                    "URL in SPY_OPPONENT_BASE_URL with key SPY_OPPONENT_API_KEY.", tmp_path / "b")
    assert static_line(by_env).startswith("- `qwen-plus`: URL from `$SPY_OPPONENT_BASE_URL`, key from "
                                          "`$SPY_OPPONENT_API_KEY`. While `$SPY_OPPONENT_BASE_URL` or "
                                          "`$SPY_OPPONENT_API_KEY` is unset, the server serves a frozen local copy")
    fixed = render("狼人杀，只有预言家和女巫训练，其余角色由 qwen-max 扮演，4张卡", tmp_path / "c")
    assert static_line(fixed).startswith("- `qwen-max`: https://dashscope.aliyuncs.com/compatible-mode/v1, key from "
                                         "`$DASHSCOPE_API_KEY`. While `$DASHSCOPE_API_KEY` is unset")
    for project in (local, by_env, fixed):
        assert "None" not in (project / "readme.md").read_text()


def test_werewolves_docs_follow_the_trainable_teams(tmp_path):
    one_side = render("狼人杀，只有预言家和女巫参与训练，狼人和村民由 qwen-max 扮演", tmp_path / "one")
    readme, run = (one_side / "readme.md").read_text(), (one_side / "agent_run.py").read_text()
    assert readme.startswith("# Werewolves: GRPO with a shared seer/witch model")
    assert "Only the seer and witch train: each game opens one episode, for team `village`" in readme
    assert "opposite sides" not in readme and "opposite sides" not in run
    assert "so a game fills one episode: it holds the calls of the\nseer and witch" in run
    two_sides = render("Werewolves: the werewolves and the seer train, the others are played by qwen-max.",
                       tmp_path / "two")
    readme = (two_sides / "readme.md").read_text()
    assert "The werewolves and the seer share the trainable model but play on opposite sides" in readme
    assert "the seer's episode earns" in readme
