"""Issue 25 item 8: one login for people. `vibe-rl traces serve` and the swarm server's /control/ui open in a real
headless browser (Debian's chromium) only through a one-time login link that sets an HttpOnly, SameSite=Strict
cookie; without it (or with a used link) a page is refused; Host/Origin must name the server; viewer pages
carry CSP and X-Frame-Options; the admin token is never in a URL or the output."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from helpers.servers import trace_viewer

from vibe_rl.swarm import SwarmClient, Task, TrainJob, WorkflowOutput
from vibe_rl.swarm.auth import client_token

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CLI = [sys.executable, "-c", "from vibe_rl.cli import main; main()"]
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium package (apt-get install "
                                                              "chromium)")


def dom(url: str, profile: Path) -> str:
    """The DOM chromium rendered for `url` with the browser profile `profile` (its cookies persist)."""
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                           f"--user-data-dir={profile}", "--dump-dom", url],
                          capture_output=True, text=True, timeout=120, check=True)
    return done.stdout


def _episodes(server_url: str) -> None:
    with SwarmClient(server_url) as client:
        client.auto_sync_train_config_and_start_engine(TrainJob(), verbose=False)
        for task_id in ("game-1", "game-2"):
            episode_uuid, api = client.begin_episode()
            import openai

            llm = openai.OpenAI(base_url=api.base_url, api_key=api.api_key, max_retries=0)
            llm.chat.completions.create(model=api.model, messages=[{"role": "user", "content": "hi"}], max_tokens=2)
            client.end_episode(Task(task_id=task_id), episode_uuid, WorkflowOutput(reward=1.0))


@needs_chromium
def test_item8_traces_serve_needs_the_login_link(make_server, tmp_path):
    srv = make_server("viewer")
    _episodes(srv.url)
    srv.stop()
    with trace_viewer(srv.exp_dir) as (base, login, port):
        stranger = dom(base + "/ui", tmp_path / "stranger")  # a browser without the link
        assert "Login needed" in stranger and "game-1" not in stranger
        assert "game-1" in dom(login, tmp_path / "me")  # the link logs in and lands on the episodes
        again = dom(base + "/ui", tmp_path / "me")  # the same browser, later: its cookie
        assert "game-1" in again and "game-2" in again
        assert "game-1" not in dom(login, tmp_path / "other")  # a link opens one browser only
        plain = httpx.get(base + "/ui")
        assert plain.status_code == 401 and plain.headers["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in plain.headers["content-security-policy"]
        rebound = httpx.get(base + "/ui", headers={"host": f"127.0.0.1.attacker.example:{port}"})
        assert rebound.status_code == 403
        used = httpx.get(login, follow_redirects=False)
        assert used.status_code == 401 and "set-cookie" not in used.headers


@needs_chromium
def test_item8_control_ui_opens_with_a_login_link(make_server, tmp_path):
    srv = make_server("ui")
    _episodes(srv.url)
    done = subprocess.run([*CLI, "swarm", "ui", "--url", srv.url], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    token = client_token(srv.url)
    assert token not in done.stdout + done.stderr
    link = re.search(r"(http://127\.0\.0\.1:\d+/control/ui/login\?code=[\w-]+)", done.stdout)
    assert link, done.stdout
    assert "game-1" not in dom(srv.url + "/control/ui", tmp_path / "stranger")
    assert "game-2" in dom(link[1], tmp_path / "me")
    assert "game-1" in dom(srv.url + "/control/ui", tmp_path / "me")
    # the cookie opens the viewer's pages only: the control API still needs the token
    first = httpx.get(link[1], follow_redirects=False)
    assert first.status_code == 401  # used up by the browser
    fresh = subprocess.run([*CLI, "swarm", "ui", "--url", srv.url], capture_output=True, text=True, timeout=120)
    url = re.search(r"(http://\S+/control/ui/login\?code=[\w-]+)", fresh.stdout)[1]
    with httpx.Client() as browser:
        landed = browser.get(url, follow_redirects=False)
        assert landed.status_code == 303 and landed.headers["location"] == "/control/ui"
        cookie = landed.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and token not in cookie
        assert browser.get(srv.url + "/control/ui").status_code == 200
        assert browser.get(srv.url + "/control/status").status_code == 401
        assert browser.post(srv.url + "/control/stop").status_code == 401
    page = httpx.get(srv.url + "/control/ui", headers={"authorization": f"Bearer {token}"})
    assert page.status_code == 200 and page.headers["x-frame-options"] == "DENY"
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert token not in srv.output()

