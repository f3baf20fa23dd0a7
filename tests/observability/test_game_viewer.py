"""Issue 29, the game-aware trace viewer, in a real headless browser (Debian's chromium): a real swarm server on the
tiny model records two short four-seat games (two civilians on the trainable model, a spy on a frozen local copy,
a spy on a scripted OpenAI-compatible upstream that answers with a Hermes tool call); `vibe-rl traces serve` then
shows each game as a timeline with a lane per player, the model of every call (trainable or static), the tool call
parsed, the sampled tokens coloured by logprob and marked by the loss mask, each seat's reward (`seat_rewards`
when the game reported them), and its filters (reward range, seat) narrow what is shown. Untrusted text (a task id,
a prompt) is escaped. Screenshots: <tmp_path>/screenshots/{timeline,spies,episodes}.png (the test prints where).
Bounded by events (each call answers, each browser run exits), never by a clock."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import openai
import pytest
from helpers.scripted_api import ScriptedAPI
from helpers.servers import trace_viewer

from vibe_rl.swarm import SwarmClient, Task, TrainJob, WorkflowOutput

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
VOTE = 'I vote now. <tool_call>{"name": "vote", "arguments": {"target": "player_2"}}</tool_call>'
EVIL_TASK = "game-2<script>alert(1)</script>"
SEATS = {"civilian:player_1": 1.0, "spy:player_2": -1.0, "civilian:player_3": 0.5, "spy:player_4": -1.0}


def play(client: SwarmClient, task_id: str, reward: float, seat_rewards: dict[str, float] | None) -> str:
    """One game of two rounds: every seat speaks, then civilian:player_1 answers again (a longer conversation)."""
    episode_uuid, api = client.begin_episode(discard_episode_timeout=600)
    llm = openai.OpenAI(base_url=api.base_url, api_key=api.api_key, max_retries=2)
    history = [{"role": "user", "content": "describe the word <b>apple</b>"}]
    first = None
    for player, model in (("civilian:player_1", api.model), ("spy:player_2", "opponent"),
                          ("civilian:player_3", api.model), ("spy:player_4", "judge")):
        said = llm.chat.completions.create(model=model, messages=history, user=player, max_tokens=6)
        first = first or said.choices[0].message.content
    history += [{"role": "assistant", "content": first}, {"role": "user", "content": "now vote"}]
    llm.chat.completions.create(model=api.model, messages=history, user="civilian:player_1", max_tokens=6)
    metadata = {"winner": "civilians" if reward > 0 else "spies"}
    if seat_rewards:
        metadata["seat_rewards"] = seat_rewards
    client.end_episode(Task(task_id=task_id), episode_uuid, WorkflowOutput(reward=reward, metadata=metadata))
    return episode_uuid


def chromium(url: str, profile: Path, shot: Path | None = None) -> str:
    """The DOM chromium rendered for `url` (the profile keeps the session cookie); a screenshot too when asked."""
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--window-size=1600,1400", f"--user-data-dir={profile}"]
    if shot is not None:
        subprocess.run([*flags, f"--screenshot={shot}", url], capture_output=True, text=True, timeout=120, check=True)
    return subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=True).stdout


def lanes(dom: str) -> list[str]:
    return re.findall(r"<div class=\"lane-head\" data-player=\"([^\"]+)\"", dom)


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium package (scripts/setup.sh installs it as root)")
def test_game_timeline_in_headless_chromium(live_server, tmp_path):
    with ScriptedAPI([VOTE]) as upstream:
        job = TrainJob(static_models=[{"name": "opponent"}, {"name": "judge", "base_url": upstream.url}])
        (tmp_path / "job.yaml").write_text(json.dumps(job.model_dump(mode="json")))  # JSON is YAML
        server = live_server(["train.batch_size=8"], extra=["--config", str(tmp_path / "job.yaml")])
        with SwarmClient(server.url) as client:
            client.auto_sync_train_config_and_start_engine(job, verbose=False)
            assert client.get_engine_status()["trace_viewer"] == "/control/ui"  # the status names the viewer
            won = play(client, "game-1", 1.0, SEATS)
            lost = play(client, EVIL_TASK, 0.0, None)
        server.stop()

    shots, profile = tmp_path / "screenshots", tmp_path / "chromium-profile"
    shots.mkdir()
    with trace_viewer(server.exp_dir) as (base, login, _):
        chromium(login, profile)  # the one-time link sets the session cookie in this profile
        timeline = chromium(f"{base}/ui/episode/{won}", profile, shots / "timeline.png")
        spies = chromium(f"{base}/ui/episode/{won}?seat=spy", profile, shots / "spies.png")
        other = chromium(f"{base}/ui/episode/{lost}", profile)
        index = chromium(f"{base}/ui?min_reward=0.5", profile, shots / "episodes.png")
        everything = chromium(f"{base}/ui", profile)
    for png in ("timeline.png", "spies.png", "episodes.png"):
        assert (shots / png).read_bytes()[:4] == b"\x89PNG" and (shots / png).stat().st_size > 10_000
    print(f"screenshots: {shots}")

    # one timeline, a lane per player in order of their first call, the calls in order down the page
    assert lanes(timeline) == list(SEATS)
    turns = re.findall(r"<div class=\"turn (\w+)\" data-model=\"(\w+)\" data-static=\"(\d)\" data-player=\"([^\"]+)\"",
                       timeline)
    assert turns == [("trainable", "tiny", "0", "civilian:player_1"), ("static", "opponent", "1", "spy:player_2"),
                     ("trainable", "tiny", "0", "civilian:player_3"), ("static", "judge", "1", "spy:player_4"),
                     ("trainable", "tiny", "0", "civilian:player_1")]
    assert "grid-column: 2" in timeline or "grid-column:2" in timeline
    # each seat's own reward from seat_rewards; a game without them shows the episode's reward per seat
    heads = dict(re.findall(r"data-player=\"([^\"]+)\"[^>]*>[^<]*<div class=\"meta\">[^<]*<span class=\"seat-reward\">"
                            r"([-\d.]+)</span>", timeline))
    assert heads == {"civilian:player_1": "1", "spy:player_2": "-1", "civilian:player_3": "0.5", "spy:player_4": "-1"}
    assert "(seat_rewards)" in timeline and "(the episode's reward)" in other and "(seat_rewards)" not in other
    # the tool call of the scripted upstream, parsed as the server parses it
    assert re.search(r"<td class=\"tool-name\">vote</td><td><pre>\{\s*\"target\": \"player_2\"\s*\}</pre>", timeline)
    # sampled tokens: coloured by logprob, the trainable model's trained (mask 1), the frozen copy's context (mask 0)
    toks = re.findall(r"<span class=\"tok (trained|context)\" data-logprob=\"(-?[\d.]+)\" data-mask=\"(\d)\" "
                      r"style=\"background:hsl\((\d+),", timeline)
    assert {m for m, *_ in toks} == {"trained", "context"} and len(toks) >= 4  # 4 tiny-engine calls
    assert all((m == "trained") == (mask == "1") and float(lp) <= 0 and 0 <= int(h) <= 120 for m, lp, mask, h in toks)
    assert "(token ids: no tokenizer)" not in timeline  # the tiny model's tokenizer decoded the pieces
    assert "no sampled tokens recorded" in timeline  # the upstream model: no token ids come back
    # filters: the seat filter keeps the spies' lanes; a reward range keeps the won game
    assert lanes(spies) == ["spy:player_2", "spy:player_4"] and "2 of 5 calls, 2 lanes" in spies
    assert re.findall(r"<tr class=\"episode\" data-episode=\"(\w+)\"", index) == [won]
    assert sorted(re.findall(r"<tr class=\"episode\" data-episode=\"(\w+)\"", everything)) == sorted([won, lost])
    # untrusted text stays text
    for dom in (everything, other, timeline):
        assert "<script>alert(1)" not in dom and "<b>apple</b>" not in dom
    assert "game-2&lt;script&gt;alert(1)&lt;/script&gt;" in everything
    assert "describe the word &lt;b&gt;apple&lt;/b&gt;" in timeline
