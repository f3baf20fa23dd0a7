"""The trace viewer: plain server-rendered HTML pages over an experiment's recorded episodes.

- index: the episodes (newest first) with task, reward, status, the step that trained on them, their
  players and the models they reached; filters by task, player (tag or role) and model.
- episode: the reward and task, then each player's conversation in order: every call's prompt (the
  last message, the whole conversation folded), the answer (tool calls included, as the model wrote
  them), the model that answered (trainable server or static model) and the weight version.

Served by `vibe-rl traces serve EXPERIMENT_DIR` (stdlib HTTP server, loopback; the index at `/` and `/ui`,
episodes under `/ui/episode/<uuid>`) and by the swarm
server under `/control/ui`; both open for a browser through a one-time login link and a session cookie
(`vibe_rl.swarm.server.login`), the swarm server also for the admin token.
"""

from __future__ import annotations

import html
import json
from typing import Any
from urllib.parse import quote, urlencode

from vibe_rl.swarm.observe.traces import TraceReader

STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}th{background:#f3f3f3}
.player{border:1px solid #bbb;border-radius:6px;margin:1em 0;padding:.5em 1em}
.turn{border-top:1px dashed #ccc;padding:.4em 0}.model{font-weight:bold}.static{color:#a55}.trainable{color:#262}
pre{white-space:pre-wrap;background:#f8f8f8;padding:.4em;margin:.2em 0}.meta{color:#666;font-size:90%}
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{_e(title)}</title>"
            f"<style>{STYLE}</style></head><body>{body}</body></html>")


def _select(name: str, label: str, options: list[str], chosen: str | None) -> str:
    opts = "".join(f"<option value='{_e(o)}'{' selected' if o == chosen else ''}>{_e(o)}</option>" for o in options)
    return f"<label>{_e(label)} <select name='{name}' id='filter-{name}'><option value=''>all</option>{opts}</select></label> "


def index_page(reader: TraceReader, base: str, task: str | None = None, player: str | None = None,
               model: str | None = None) -> str:
    episodes = reader.episodes(task or None, player or None, model or None)
    choices = reader.filters()
    form = (f"<form method='get' action='{_e(base)}' id='filters'>"
            + _select("task", "task", choices["tasks"], task) + _select("player", "player", choices["players"], player)
            + _select("model", "model", choices["models"], model) + "<button type='submit'>filter</button></form>")
    rows = []
    for ep in episodes:
        link = f"{base}/episode/{quote(ep['episode_uuid'])}"
        rows.append(f"<tr class='episode' data-episode='{_e(ep['episode_uuid'])}'>"
                    f"<td><a href='{_e(link)}'>{_e(ep['episode_uuid'][:12])}</a></td><td class='task'>{_e(ep['task_id'])}</td>"
                    f"<td class='reward'>{ep['reward']:.4g}</td><td>{_e(ep['status'])}</td><td>{_e(ep['trained_step'])}</td>"
                    f"<td>{ep['turns']}</td><td>{_e(', '.join(ep['players']))}</td><td>{_e(', '.join(ep['models']))}</td></tr>")
    table = ("<table id='episodes'><tr><th>episode</th><th>task</th><th>reward</th><th>status</th>"
             "<th>trained at step</th><th>calls</th><th>players</th><th>models</th></tr>" + "".join(rows) + "</table>")
    shown = f"<p class='meta' id='count'>{len(episodes)} episodes</p>"
    return _page("vibe-rl traces", f"<h1>Episodes</h1><p class='meta'>{_e(reader.path)}</p>{form}{shown}{table}")


def _turn(turn: dict[str, Any]) -> str:
    kind = "static" if turn["static"] else "trainable"
    messages = turn["messages"] or []
    last = messages[-1] if messages else {}
    prompt = last.get("content") if isinstance(last.get("content"), str) else json.dumps(last.get("content"))
    folded = json.dumps(messages, ensure_ascii=False, indent=1)
    return (f"<div class='turn' data-model='{_e(turn['model'])}' data-static='{int(turn['static'])}'>"
            f"<div class='meta'>call {turn['idx']} &middot; <span class='model {kind}'>{_e(turn['model'])}</span> "
            f"({kind}{'' if turn['static'] else ', weight version ' + _e(turn['weight_version'])})</div>"
            f"<div>prompt ({_e(last.get('role', '?'))}):</div><pre class='prompt'>{_e(prompt)}</pre>"
            f"<details><summary>whole conversation ({len(messages)} messages)</summary><pre>{_e(folded)}</pre></details>"
            f"<div>answer:</div><pre class='answer'>{_e(turn['response'])}</pre></div>")


def episode_page(reader: TraceReader, base: str, episode_uuid: str) -> str | None:
    ep = reader.episode(episode_uuid)
    if ep is None:
        return None
    players: dict[str, list[dict[str, Any]]] = {}
    for turn in ep["turns"]:  # players in order of their first call
        players.setdefault(turn["player"] or "(untagged)", []).append(turn)
    sections = "".join(
        f"<section class='player' data-player='{_e(name)}'><h2>{_e(name)}</h2>"
        f"<p class='meta'>{len(turns)} calls, models: {_e(', '.join(sorted({t['model'] for t in turns})))}</p>"
        + "".join(_turn(t) for t in turns) + "</section>" for name, turns in players.items())
    head = (f"<p><a href='{_e(base)}'>all episodes</a> &middot; <a href='{_e(base)}?{urlencode({'task': ep['task_id']})}'>"
            f"this task's episodes</a></p><h1>Episode {_e(ep['episode_uuid'])}</h1>"
            f"<table id='summary'><tr><th>task</th><td>{_e(ep['task_id'])}</td></tr>"
            f"<tr><th>reward</th><td id='reward'>{ep['reward']:.4g}</td></tr>"
            f"<tr><th>status</th><td>{_e(ep['status'])}</td></tr><tr><th>trained at step</th>"
            f"<td>{_e(ep['trained_step'])}</td></tr><tr><th>metadata</th><td><pre>"
            f"{_e(json.dumps(ep['metadata'], ensure_ascii=False))}</pre></td></tr></table>")
    return _page(f"episode {episode_uuid[:12]}", head + sections)


def page(exp_dir: str, base: str, rest: str, params: dict[str, str]) -> tuple[int, str]:
    """(HTTP status, HTML) of the viewer page at `base + rest` ('' or '/episode/<uuid>')."""
    from vibe_rl.errors import ConfigError

    try:
        reader = TraceReader(exp_dir)
    except ConfigError as exc:
        return 404, _page("no traces", f"<h1>No traces yet</h1><p>{_e(exc)}</p>")
    rest = rest.rstrip("/")
    if rest in ("", "/"):
        return 200, index_page(reader, base, params.get("task"), params.get("player"), params.get("model"))
    if rest.startswith("/episode/"):
        found = episode_page(reader, base, rest[len("/episode/"):])
        if found is not None:
            return 200, found
    return 404, _page("not found", f"<h1>Not found</h1><p><a href='{_e(base)}'>all episodes</a></p>")


def serve(exp_dir: str, host: str = "127.0.0.1", port: int = 8765, allowed_hosts: list[str] | None = None,
          announce=None) -> None:
    """Serve the viewer of a finished (or running) experiment until Ctrl-C (stdlib HTTP server).

    Its pages hold every prompt and answer of the run, so they open only with the session cookie of the one-time
    login link printed at the start (vibe_rl.swarm.server.login), and only under a Host/Origin that names this server
    (loopback names, the bind address, `allowed_hosts`: no DNS rebinding)."""
    import secrets
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import parse_qsl, unquote, urlsplit

    from vibe_rl.swarm.server.guard import Guard
    from vibe_rl.swarm.server.login import SECURITY_HEADERS, Logins, login_page

    guard = Guard(host, secrets.token_urlsafe(32), list(allowed_hosts or []), 1024)
    logins: Logins

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status: int, body: str, extra: dict[str, str] | None = None) -> None:
            data = body.encode()
            self.send_response(status)
            for key, value in {**SECURITY_HEADERS, "Content-Type": "text/html; charset=utf-8",
                               "Content-Length": str(len(data)), **(extra or {})}.items():
                self.send_header(key, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            url = urlsplit(self.path)
            path = unquote(url.path)
            scope = {"method": "GET", "path": path, "headers": [(k.lower().encode("latin-1"), v.encode("latin-1"))
                                                                 for k, v in self.headers.items()]}
            refused = guard.check(scope)  # Host and Origin must name this server
            if refused is not None:
                return self._answer(refused.status, login_page(refused.message))
            if path == "/ui/login":
                session = logins.redeem(dict(parse_qsl(url.query)).get("code"))
                if session is None:
                    return self._answer(401, login_page("This login link is unknown, used or expired: restart "
                                                        "`vibe-rl traces serve` for a new one."))
                return self._answer(303, "", {"Location": "/", "Set-Cookie": logins.set_cookie(session, "/")})
            if not logins.session_ok(self.headers.get("Cookie")):
                return self._answer(401, login_page("Open the one-time login link that `vibe-rl traces serve` "
                                                    "printed when it started (or restart it for a new one)."))
            params = dict(parse_qsl(url.query))
            if path in ("", "/"):  # the front door is the episode list itself (its links lead under /ui)
                status, body = page(exp_dir, "/ui", "", params)
            elif path == "/ui" or path.startswith("/ui/"):
                status, body = page(exp_dir, "/ui", path[3:], params)
            else:
                status, body = 404, _page("not found", "<h1>Not found</h1><p><a href='/'>the episodes</a></p>")
            self._answer(status, body)

        do_HEAD = do_GET  # noqa: N815

        def log_message(self, fmt: str, *args: Any) -> None:  # quiet: one line per request (and its codes) is noise
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    logins = Logins(server.server_address[1])
    shown = f"[{host}]" if ":" in host else host
    (announce or (lambda line: print(line, flush=True)))(f"trace viewer of {exp_dir}: open once http://{shown}:{server.server_address[1]}/ui/login?code="
             f"{logins.issue_code()} (a one-time login link, valid {logins.code_ttl:.0f} s; Ctrl-C to stop)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
