"""`vibe-rl traces serve` answers `/` with the episode list (it used to send an empty redirect page), behind the
same one-time login link and session cookie as `/ui`; the list's links open the episodes."""

from __future__ import annotations

import re
import sys

import httpx
from helpers.servers import trace_viewer

from vibe_rl.rl.samples import Turn
from vibe_rl.swarm.server.pool import CompletedEpisode
from vibe_rl.swarm.server.store import Store

CLI = [sys.executable, "-c", "from vibe_rl.cli import main; main()"]


def record(exp_dir) -> None:
    """A finished run's episode database: two episodes of two tasks, one call each."""
    store = Store(exp_dir / "swarm.sqlite")
    for i, task_id in enumerate(("game-1", "game-2")):
        turn = Turn([1, 2], [3], [-0.1], [{"role": "user", "content": f"prompt of {task_id}"}],
                    response_text=f"answer of {task_id}", player="solver:0", model="tiny", ts=float(i))
        store.save_episode(CompletedEpisode(f"ep{i}", task_id, 0.5 * i, [turn], float(i)), {"task_id": task_id}, {})
    store.close()


def test_root_shows_the_episode_list_after_login(tmp_path):
    exp = tmp_path / "exp"
    exp.mkdir()
    record(exp)
    with trace_viewer(exp) as (base, login, _):
        stranger = httpx.get(base + "/")  # no cookie: the login page, no episode
        assert stranger.status_code == 401 and "Login needed" in stranger.text and "game-1" not in stranger.text

        landed = httpx.get(login, follow_redirects=False)  # the link sets the cookie and lands on /
        assert landed.status_code == 303 and landed.headers["location"] == "/"
        cookie = landed.headers["set-cookie"].split(";", 1)[0]
        with httpx.Client(base_url=base, headers={"cookie": cookie}) as me:
            root = me.get("/")
            assert root.status_code == 200 and root.headers["x-frame-options"] == "DENY"
            assert re.findall(r"<tr class='episode' data-episode='(\w+)'", root.text) == ["ep1", "ep0"]
            assert "game-1" in root.text and "game-2" in root.text and "2 episodes" in root.text
            assert me.get("/ui").text == root.text  # the same list under /ui
            filtered = me.get("/", params={"task": "game-2"})
            assert re.findall(r"<tr class='episode' data-episode='(\w+)'", filtered.text) == ["ep1"]
            link_to = re.search(r"href='(/ui/episode/ep0)'", root.text)[1]  # the list's links open episodes
            episode = me.get(link_to)
            assert episode.status_code == 200 and "prompt of game-1" in episode.text
            assert "answer of game-1" in episode.text
            assert me.get("/elsewhere").status_code == 404
