"""The trace viewer: plain server-rendered HTML pages over an experiment's recorded episodes (no script: the
pages keep the CSP `default-src 'none'`; filters are GET forms, folding is <details>).

- index: the episodes (newest first) with task (the GRPO group key), reward, seat rewards, status, the step that
  trained on them, their players and the models they reached; filters by task, group (the update step that
  trained them, or their status), seat (player tag or role), model and a reward range.
- episode: one game as a timeline: a lane per player (in order of their first call), the calls in order down the
  page; each call shows the model that answered (trainable server or static model, the weight version), the
  prompt, the whole conversation folded, the answer with its tool calls parsed as the server parses them, and the
  sampled tokens coloured by logprob and marked by the loss mask (`vibe_rl.swarm.observe.tokens`); each lane's
  head gives the seat's reward (`seat_rewards` of the episode's output metadata, else the episode's reward);
  filters by seat and model.

Served by `vibe-rl traces serve EXPERIMENT_DIR` (stdlib HTTP server, loopback; the index at `/` and `/ui`,
episodes under `/ui/episode/<uuid>`) and by the swarm
server under `/control/ui`; both open for a browser through a one-time login link and a session cookie
(`vibe_rl.swarm.server.login`), the swarm server also for the admin token.
"""

from __future__ import annotations

import html
import json
import math
from typing import Any
from urllib.parse import quote, urlencode

from vibe_rl.swarm.observe.tokens import colour, tokens
from vibe_rl.swarm.observe.traces import TraceReader

STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}th{background:#f3f3f3}
.turn{border:1px solid #bbb;border-radius:6px;padding:.3em .6em;background:#fff;min-width:0}
.turn.static{border-left:5px solid #c66}.turn.trainable{border-left:5px solid #3a3}
.model{font-weight:bold}span.static{color:#a33}span.trainable{color:#262}
pre{white-space:pre-wrap;word-break:break-word;background:#f8f8f8;padding:.4em;margin:.2em 0}
.meta{color:#666;font-size:90%}form label{margin-right:.8em}input[type=number]{width:6em}
.timeline{display:grid;gap:.4em .6em;align-items:start;overflow-x:auto;background:#fafafa;padding:.4em}
.lane-head{position:sticky;top:0;background:#eef;border-radius:6px;padding:.3em .6em;font-weight:bold}
.lane-head .meta{font-weight:normal}.step{color:#888;font-size:85%;text-align:right;padding-top:.4em}
.tokens{font-family:ui-monospace,monospace;font-size:85%;line-height:1.7;white-space:pre-wrap;word-break:break-all}
.tok{border-radius:2px;padding:0 1px;margin-right:1px}.tok.trained{border-bottom:2px solid #135}
.tok.context{border-bottom:2px dotted #999;opacity:.75}
pre.prompt{max-height:9em;overflow:auto}.calls td,.calls th{font-size:90%}.legend span{padding:0 .4em;margin-right:.3em}
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _num(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) else _e(value)


def _page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{_e(title)}</title>"
            f"<style>{STYLE}</style></head><body>{body}</body></html>")


def _select(name: str, label: str, options: list[str], chosen: str | None) -> str:
    opts = "".join(f"<option value='{_e(o)}'{' selected' if o == chosen else ''}>{_e(o)}</option>" for o in options)
    return f"<label>{_e(label)} <select name='{name}' id='filter-{name}'><option value=''>all</option>{opts}</select></label> "


def _number(name: str, label: str, value: str | None) -> str:
    return (f"<label>{_e(label)} <input type='number' step='any' name='{name}' id='filter-{name}' "
            f"value='{_e(value or '')}'></label> ")


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "") else None
    except ValueError:
        return None


def index_page(reader: TraceReader, base: str, task: str | None = None, player: str | None = None,
               model: str | None = None, group: str | None = None, min_reward: str | None = None,
               max_reward: str | None = None) -> str:
    episodes = reader.episodes(task or None, player or None, model or None, group=group or None,
                               min_reward=_float(min_reward), max_reward=_float(max_reward))
    choices = reader.filters()
    form = (f"<form method='get' action='{_e(base)}' id='filters'>"
            + _select("task", "task", choices["tasks"], task) + _select("group", "group", choices["groups"], group)
            + _select("player", "seat", choices["players"], player) + _select("model", "model", choices["models"], model)
            + _number("min_reward", "reward from", min_reward) + _number("max_reward", "to", max_reward)
            + "<button type='submit'>filter</button></form>")
    rows = []
    for ep in episodes:
        link = f"{base}/episode/{quote(ep['episode_uuid'])}"
        seats = ", ".join(f"{p}={v:.3g}" for p, v in sorted(ep["seat_rewards"].items()))
        rows.append(f"<tr class='episode' data-episode='{_e(ep['episode_uuid'])}'>"
                    f"<td><a href='{_e(link)}'>{_e(ep['episode_uuid'][:12])}</a></td><td class='task'>{_e(ep['task_id'])}</td>"
                    f"<td class='reward'>{ep['reward']:.4g}</td><td class='seat-rewards'>{_e(seats)}</td>"
                    f"<td>{_e(ep['status'])}</td><td>{_e(ep['trained_step'])}</td>"
                    f"<td>{ep['turns']}</td><td>{_e(', '.join(ep['players']))}</td><td>{_e(', '.join(ep['models']))}</td></tr>")
    table = ("<table id='episodes'><tr><th>episode</th><th>task (group)</th><th>reward</th><th>seat rewards</th>"
             "<th>status</th><th>trained at step</th><th>calls</th><th>players</th><th>models</th></tr>"
             + "".join(rows) + "</table>")
    shown = f"<p class='meta' id='count'>{len(episodes)} episodes</p>"
    return _page("vibe-rl traces", f"<h1>Episodes</h1><p class='meta'>{_e(reader.path)}</p>{form}{shown}{table}")


def _tool_calls(text: str | None) -> tuple[str | None, str]:
    """(the answer's content, an HTML table of its parsed tool calls) — parsed as the server parses them."""
    from vibe_rl.swarm.server.chat import parse_tool_calls

    content, calls = parse_tool_calls(text or "")
    if not calls:
        return text, ""
    rows = []
    for call in calls:
        args = call["function"]["arguments"]
        try:
            args = json.dumps(json.loads(args), ensure_ascii=False, indent=1)
        except ValueError:
            pass
        rows.append(f"<tr class='tool-call'><td class='tool-name'>{_e(call['function']['name'])}</td>"
                    f"<td><pre>{_e(args)}</pre></td></tr>")
    return content, f"<table class='calls'><tr><th>tool call</th><th>arguments</th></tr>{''.join(rows)}</table>"


def _tokens(turn: dict[str, Any], status: str, model_path: str | None) -> str:
    drawn = tokens(turn, status, model_path)
    if not drawn["tokens"]:
        return "<div class='meta'>no sampled tokens recorded</div>"
    spans = []
    for text, lp, trained in drawn["tokens"]:
        mask = "trained" if trained else "context"
        back = f" style='background:{colour(lp)}'" if lp is not None else ""
        tip = f"logprob {lp:.3f}, p {math.exp(lp):.3f}" if lp is not None else "no logprob"
        spans.append(f"<span class='tok {mask}' data-logprob='{'' if lp is None else f'{lp:.4f}'}' "
                     f"data-mask='{int(trained)}'{back} title='{_e(tip)} ({mask})'>{_e(text)}</span>")
    more = f" <span class='meta'>(+{drawn['cut']} tokens not shown)</span>" if drawn["cut"] else ""
    return (f"<details class='sampled' open><summary>{len(drawn['tokens']) + drawn['cut']} sampled tokens, "
            f"{_e(drawn['why'])}{'' if drawn['decoded'] else ' (token ids: no tokenizer)'}</summary>"
            f"<div class='tokens'>{''.join(spans)}{more}</div></details>")


def _turn(turn: dict[str, Any], status: str, model_path: str | None, row: int, lane: int) -> str:
    kind = "static" if turn["static"] else "trainable"
    messages = turn["messages"] or []
    last = messages[-1] if messages else {}
    prompt = last.get("content") if isinstance(last.get("content"), str) else json.dumps(last.get("content"))
    folded = json.dumps(messages, ensure_ascii=False, indent=1)
    content, calls = _tool_calls(turn["response"])
    return (f"<div class='turn {kind}' data-model='{_e(turn['model'])}' data-static='{int(turn['static'])}' "
            f"data-player='{_e(turn['player'] or '(untagged)')}' style='grid-row:{row};grid-column:{lane}'>"
            f"<div class='meta'>call {turn['idx']} &middot; <span class='model {kind}'>{_e(turn['model'])}</span> "
            f"({kind}{'' if turn['static'] else ', weight version ' + _e(turn['weight_version'])})"
            + (f" &middot; {turn['prompt_tokens']} prompt tokens (context)" if turn["prompt_tokens"] else "")
            + "</div>"
            f"<div>prompt ({_e(last.get('role', '?'))}):</div><pre class='prompt'>{_e(prompt)}</pre>"
            f"<details><summary>whole conversation ({len(messages)} messages)</summary><pre>{_e(folded)}</pre></details>"
            f"<div>answer:</div><pre class='answer'>{_e(content)}</pre>{calls}"
            f"{_tokens(turn, status, model_path)}</div>")


def episode_page(reader: TraceReader, base: str, episode_uuid: str, seat: str | None = None,
                 model: str | None = None) -> str | None:
    """One game as a timeline: a lane (column) per player in order of their first call, calls in order down
    the page; `seat` (tag or role) and `model` keep only the matching calls."""
    ep = reader.episode(episode_uuid)
    if ep is None:
        return None
    model_path = reader.model_path()
    everyone = list(dict.fromkeys(t["player"] or "(untagged)" for t in ep["turns"]))
    turns = [t for t in ep["turns"] if (not seat or (t["player"] or "") == seat or (t["player"] or "").startswith(seat + ":"))
             and (not model or t["model"] == model)]
    lanes = list(dict.fromkeys(t["player"] or "(untagged)" for t in turns))
    heads = []
    for k, name in enumerate(lanes):
        mine = [t for t in turns if (t["player"] or "(untagged)") == name]
        trainable = sorted({t["model"] for t in mine if not t["static"]})
        static = sorted({t["model"] for t in mine if t["static"]})
        own = ep["seat_rewards"].get(name)
        reward = (f"<span class='seat-reward'>{own:.4g}</span> (seat_rewards)" if own is not None else
                  f"<span class='seat-reward'>{ep['reward']:.4g}</span> (the episode's reward)")
        heads.append(f"<div class='lane-head' data-player='{_e(name)}' style='grid-row:1;grid-column:{k + 2}'>"
                     f"{_e(name)}<div class='meta'>{len(mine)} calls &middot; reward {reward}<br>"
                     + (f"trainable: <span class='trainable'>{_e(', '.join(trainable))}</span> " if trainable else "")
                     + (f"static: <span class='static'>{_e(', '.join(static))}</span>" if static else "")
                     + "</div></div>")
    cells = [f"<div class='step' style='grid-row:{r + 2};grid-column:1'>#{t['idx']}</div>"
             + _turn(t, ep["status"], model_path, r + 2, lanes.index(t["player"] or "(untagged)") + 2)
             for r, t in enumerate(turns)]
    timeline = (f"<div class='timeline' id='timeline' data-lanes='{len(lanes)}' "
                f"style='grid-template-columns:3em repeat({max(len(lanes), 1)},minmax(20em,1fr))'>"
                + "".join(heads) + "".join(cells) + "</div>")
    here = f"{base}/episode/{quote(ep['episode_uuid'])}"
    form = (f"<form method='get' action='{_e(here)}' id='lane-filters'>"
            + _select("seat", "seat", sorted({p.split(':', 1)[0] for p in everyone if ':' in p}) + everyone, seat)
            + _select("model", "model", sorted({t["model"] for t in ep["turns"] if t["model"]}), model)
            + "<button type='submit'>show</button></form>")
    seats = "".join(f"<tr class='seat-row' data-player='{_e(p)}'><th>{_e(p)}</th><td>{v:.4g}</td></tr>"
                    for p, v in ep["seat_rewards"].items())
    legend = ("<p class='legend meta'>tokens: background by logprob "
              f"<span style='background:{colour(0.0)}'>p=1</span><span style='background:{colour(math.log(0.1))}'>p=0.1</span>"
              f"<span style='background:{colour(math.log(0.01))}'>p&le;0.01</span>; "
              "<span class='tok trained'>solid underline: trained (loss mask 1)</span>"
              "<span class='tok context'>dotted: context (mask 0)</span></p>")
    head = (f"<p><a href='{_e(base)}'>all episodes</a> &middot; <a href='{_e(base)}?{urlencode({'task': ep['task_id']})}'>"
            f"this task's episodes</a></p><h1>Episode {_e(ep['episode_uuid'])}</h1>"
            f"<table id='summary'><tr><th>task (group)</th><td>{_e(ep['task_id'])}</td></tr>"
            f"<tr><th>reward</th><td id='reward'>{ep['reward']:.4g}</td></tr>"
            + (f"<tr><th colspan='2'>seat rewards</th></tr>{seats}" if seats else "")
            + f"<tr><th>status</th><td>{_e(ep['status'])}</td></tr><tr><th>trained at step</th>"
            f"<td>{_e(ep['trained_step'])}</td></tr><tr><th>metadata</th><td><pre>"
            f"{_e(json.dumps(ep['metadata'], ensure_ascii=False))}</pre></td></tr></table>")
    shown = f"<p class='meta' id='shown'>{len(turns)} of {len(ep['turns'])} calls, {len(lanes)} lanes</p>"
    return _page(f"episode {episode_uuid[:12]}", head + form + legend + shown + timeline)


def page(exp_dir: str, base: str, rest: str, params: dict[str, str]) -> tuple[int, str]:
    """(HTTP status, HTML) of the viewer page at `base + rest` ('' or '/episode/<uuid>')."""
    from vibe_rl.errors import ConfigError

    try:
        reader = TraceReader(exp_dir)
    except ConfigError as exc:
        return 404, _page("no traces", f"<h1>No traces yet</h1><p>{_e(exc)}</p>")
    rest = rest.rstrip("/")
    if rest in ("", "/"):
        return 200, index_page(reader, base, params.get("task"), params.get("player"), params.get("model"),
                               params.get("group"), params.get("min_reward"), params.get("max_reward"))
    if rest.startswith("/episode/"):
        found = episode_page(reader, base, rest[len("/episode/"):], params.get("seat"), params.get("model"))
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
