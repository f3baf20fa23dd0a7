"""The trace viewer in a real headless browser (Debian's chromium): the page of a finished run lists its
episodes, and one episode shows each player's messages and which model answered (the trainable server or
a static model). Screenshots of both pages are written under the test's tmp dir. Also: the same pages on
the swarm server behind the admin token, and `vibe-rl traces export --format jsonl`."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import openai
import pytest
from helpers.ports import free_port

from vibe_rl.swarm import SwarmClient, Task, TrainJob, WorkflowOutput
from vibe_rl.swarm.auth import client_token

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CLI = [sys.executable, "-c", "from vibe_rl.cli import main; main()"]


def play(client: SwarmClient, task_id: str, reward: float) -> str:
    """One game: two civilians on the trainable model, the spy on the static model 'opponent'."""
    episode_uuid, api = client.begin_episode(discard_episode_timeout=600)
    llm = openai.OpenAI(base_url=api.base_url, api_key=api.api_key, max_retries=2)
    for player, model, text in (("civilian:player_1", api.model, "describe the word apple"),
                                ("spy:player_2", "opponent", "describe the word pear"),
                                ("civilian:player_3", api.model, "vote out one player")):
        llm.chat.completions.create(model=model, messages=[{"role": "user", "content": text}], user=player)
    client.end_episode(Task(task_id=task_id), episode_uuid, WorkflowOutput(reward=reward, metadata={"winner": "x"}))
    return episode_uuid


def browse(url: str, shot: Path) -> str:
    """The DOM Chromium rendered for `url`, after writing a screenshot of it to `shot`."""
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--window-size=1280,1000", f"--user-data-dir={shot.parent / 'chromium-profile'}"]
    subprocess.run([*flags, f"--screenshot={shot}", url], capture_output=True, text=True, timeout=120, check=True)
    done = subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=True)
    return done.stdout


def browse_once(url: str, shot: Path) -> None:
    """Open `url` once (a one-time login link) in the browser profile that `browse` uses."""
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    f"--user-data-dir={shot.parent / 'chromium-profile'}", "--dump-dom", url],
                   capture_output=True, text=True, timeout=120, check=True)


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium package (scripts/setup.sh installs it as root)")
def test_trace_viewer_in_headless_chromium(live_server, tmp_path):
    job = TrainJob(static_models=[{"name": "opponent"}])  # no URL: the server serves a frozen local copy
    (tmp_path / "job.yaml").write_text(json.dumps(job.model_dump(mode="json")))  # JSON is YAML
    server = live_server(["train.batch_size=2"], extra=["--config", str(tmp_path / "job.yaml")])
    with SwarmClient(server.url) as client:
        client.auto_sync_train_config_and_start_engine(job, verbose=False)
        won = play(client, "game-7", 1.0)
        play(client, "game-8", 0.0)
        # the swarm server serves the same viewer under /control/ui, behind the admin token
        assert httpx.get(server.url + "/control/ui", timeout=30).status_code == 401
        inside = httpx.get(server.url + "/control/ui", timeout=30,
                           headers={"Authorization": f"Bearer {client_token(server.url)}"})
        assert inside.status_code == 200 and f"/control/ui/episode/{won}" in inside.text
    server.stop()  # a finished run: only the experiment dir is left

    port = free_port()
    viewer = subprocess.Popen([*CLI, "traces", "serve", str(server.exp_dir), "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    shots = tmp_path / "screenshots"
    shots.mkdir()
    try:
        base = f"http://127.0.0.1:{port}"
        login = re.search(r"(http://\S+/ui/login\?code=[\w-]+)", viewer.stdout.readline())[1]  # one-time link
        browse_once(login, shots / "login.png")  # sets the session cookie in the browser profile
        index = browse(base + "/ui", shots / "episodes.png")
        episode = browse(f"{base}/ui/episode/{won}", shots / "episode.png")
        filtered = browse(base + "/ui?task=game-8", shots / "filtered.png")
    finally:
        viewer.terminate()
        viewer.wait(timeout=30)

    for png in ("episodes.png", "episode.png", "filtered.png"):
        assert (shots / png).read_bytes()[:4] == b"\x89PNG" and (shots / png).stat().st_size > 10_000
    print(f"screenshots: {shots}")

    rows = re.findall(r"<tr class=\"episode\" data-episode=\"(\w+)\"", index)
    assert len(rows) == 2 and won in rows and "<p class=\"meta\" id=\"count\">2 episodes</p>" in index
    assert "game-7" in index and "game-8" in index and "opponent" in index
    assert len(re.findall(r"<tr class=\"episode\"", filtered)) == 1 and "game-8" in filtered

    players = re.findall(r"<div class=\"lane-head\" data-player=\"([^\"]+)\"", episode)  # a lane per player
    assert players == ["civilian:player_1", "spy:player_2", "civilian:player_3"]
    turns = re.findall(r"<div class=\"turn \w+\" data-model=\"([^\"]+)\" data-static=\"(\d)\"", episode)
    assert turns == [("tiny", "0"), ("opponent", "1"), ("tiny", "0")]
    assert "describe the word pear" in episode and "vote out one player" in episode
    assert "weight version 0" in episode and "<td id=\"reward\">1</td>" in episode

    out = tmp_path / "traces.jsonl"
    done = subprocess.run([*CLI, "traces", "export", str(server.exp_dir), "--format", "jsonl", "--out", str(out)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    exported = [json.loads(line) for line in out.read_text().splitlines()]
    assert [e["task_id"] for e in exported] == ["game-7", "game-8"]
    assert [(t["player"], t["model"], t["static"]) for t in exported[0]["turns"]] == [
        ("civilian:player_1", "tiny", False), ("spy:player_2", "opponent", True), ("civilian:player_3", "tiny", False)]
