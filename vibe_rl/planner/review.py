"""Where each value of a plan came from: the review table `vibe-rl new` prints before writing and keeps in the
project (plan_review.json). Each row is one field (`training.lr`, `servers.0.model_path`,
`wire.agent_roll.spy`, ...) with its value and its source:
- `spec`: the span of the spec it was read from (the offline rules record the span of each training number,
  reward and game parameter; other values are matched to a marked span that states the value next to the
  field's own word);
- `default`: the spec does not state it; `rule` is the planner's note that says which default was taken;
- `llm` (`plan` for an edited plan file): `span` is where the spec states that value, else empty with a rule.
"""

from __future__ import annotations

import json
import re
from contextlib import suppress
from pathlib import Path
from typing import Any

from vibe_rl.planner.text import SpecText, to_int
from vibe_rl.scaffold.families import Manifest, load_family
from vibe_rl.schema.spec import TaskSpec

REVIEW_FILE = "plan_review.json"
# The words of a field: a number sets it only where one of them stands in the same part of a clause
WORDS = {
    "gpus": r"gpus?|cards?|卡|显卡|[ahbv]\d{2,3}|l\d{1,2}s?|rtx|nodes?|\d+\s*[x×*]",
    "port": r"ports?|端口|:\d{4,5}|localhost|127\.0\.0\.1",
    "num_players": r"players?|玩家|人|\d+p\b|seats?|局",
    "num_spies": r"spies|spy|卧底|undercover",
    "num_civilians": r"civilians?|平民",
    "max_rounds": r"rounds?|轮",
    "max_days": r"days?|天|rounds?|轮|nights?",
    "max_turns": r"turns?|moves?|回合|步|手",
    "num_tasks": r"tasks|games|mock|pairs|papers|对局|局|条|篇|生成|examples|items",
    "win": r"win\w*|胜|赢|reward|奖励",
    "loss": r"los\w*|败|输|负|reward|奖励",
}
NOTE_WORDS = {"reward": r"reward", "gpus": r"gpu", "port": r"port", "model_path": r"model path|directory|\btiny\b",
              "modes": r"\bmodes?\b", "roles": r"role table|seats?", "family": r"family|planned as"}
_TRAIN = r"train\w*|训练|可训练|learn\w*|共享|shared|server\s*\d|服务器"


def _rows_of(spec: TaskSpec) -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = [("family", spec.family), ("gpus", spec.gpus)]
    rows += [(f"game.{k}", v) for k, v in spec.game.items() if k not in ("spec_text", "spec_quote")]
    rows += [(f"servers.{i}.{k}", getattr(s, k)) for i, s in enumerate(spec.servers)
             for k in ("model_path", "port", "gpus")]
    rows += [(f"static_models.{i}.name", m.name) for i, m in enumerate(spec.static_models)]
    rows += [(f"training.{k}", v) for k, v in spec.training.model_dump().items()]
    rows += [("reward.win", spec.reward.win), ("reward.loss", spec.reward.loss), ("modes", [m.name for m in spec.modes])]
    return rows + [(f"wire.{m.name}.{r}", spec.model_for_role(r, m.name).name)
                   for m in spec.modes for r in spec.roles]


def show(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return f"{value:g}" if isinstance(value, float) else str(value)


def _states(piece: str, value: Any) -> bool:
    """Does this piece of text state the value (a number equal to it, or the string itself)?"""
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, (int, float)):
        for m in re.finditer(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?|[零一二两三四五六七八九十百千万]+", piece, re.IGNORECASE):
            with suppress(ValueError, KeyError):
                if (float(m.group()) if re.match(r"[-+\d]", m.group()) else to_int(m.group())) == value:
                    return True
        return False
    return isinstance(value, str) and len(value) >= 2 and value.lower() in piece.lower()


def _part(src: SpecText, start: int, end: int) -> str:
    """The comma part of its clause that holds [start, end) (widened to hold it all)."""
    a, b = _piece_of(src, start) or (start, end)
    return src.text[min(a, start):max(b, end)].strip(" \t\n-*:：,，").rstrip(".。 \n")


def _spec_span(src: SpecText, field: str, value: Any, roles: dict[str, str]) -> str | None:
    if field in src.sources:
        return _part(src, *src.sources[field])
    leaf = field.rsplit(".", 1)[-1]
    if field.startswith("wire."):
        role = roles.get(leaf, re.escape(leaf))
        said = (rf"(?:{role})[^,，;；。\n]{{0,16}}?(?:{_TRAIN})|(?:train\w*|训练)\s*(?:the\s+)?(?:{role})|"
                rf"(?:{role})[^;；。\n]{{0,40}}?(?:trainable|trained|可训练)"
                if value.startswith("server") else rf"(?:{role})[^;；。\n]*?{re.escape(value)}|"
                rf"{re.escape(value)}[^;；。\n]*?(?:{role})")  # the role next to its model, not the game's name
        plain = _GAME_NAME.sub(lambda m: " " * len(m.group()), src.text)
        for start, end in src.clauses():
            for a, b in [*_pieces(plain, (start, end)), (start, end)]:  # a comma part, else the whole clause
                if re.search(said, plain[a:b], re.IGNORECASE):
                    return _part(src, a, b) if (a, b) != (start, end) else src.text[a:b].strip()
        return None
    if isinstance(value, dict):  # a role table: every seated role's count next to its word
        said = [next((src.text[a:b].strip() for a, b in _pieces(src.text, *src.clauses())
                      if count and re.search(roles.get(role, re.escape(role)), src.text[a:b], re.IGNORECASE)
                      and _states(src.text[a:b], count)), None) for role, count in value.items()]
        return " | ".join(dict.fromkeys(hit for hit in said if hit)) or None
    words = WORDS.get(leaf)
    if isinstance(value, (int, float)) and not words:
        return None
    for a, b in src.spans:
        piece = src.text[slice(*where)] if (where := _piece_of(src, a)) else None
        if piece is not None and _states(src.text[a:b] if isinstance(value, str) else piece, value) and \
                (words is None or re.search(words, piece, re.IGNORECASE)):
            return _part(src, a, b)
    at = src.text.lower().find(value.lower()) if isinstance(value, str) and len(value) >= 3 else -1
    return _part(src, at, at + len(value)) if at >= 0 else None  # a path or a model name stated verbatim


def _manifest(family: str) -> Manifest | None:
    with suppress(Exception):  # a family without a manifest: no keywords, roles named by their names
        return load_family(family)
    return None


def _family_span(text: str, family: str) -> str | None:
    """The first keyword of the family that the spec names ('谁是卧底', 'werewolves')."""
    words = manifest.all_keywords() if (manifest := _manifest(family)) else []
    lower = text.lower()
    at, word = min(((lower.find(w.lower()), w) for w in words if w and w.lower() in lower), default=(0, ""))
    return text[at:at + len(word)] if word else None


def _piece_of(src: SpecText, start: int) -> tuple[int, int] | None:
    """The comma part of its clause that holds `start` (None on a comma)."""
    return next(((a, b) for a, b in _pieces(src.text, src.clause_of(start)) if a <= start < b), None)


def _pieces(text: str, *clauses: tuple[int, int]) -> list[tuple[int, int]]:
    """The comma parts of the clauses (start, end), in order."""
    out: list[tuple[int, int]] = []
    for start, end in clauses:
        cuts = [start, *(start + i for m in re.finditer(r"[,，、;；]", text[start:end]) for i in m.span()), end]
        out += zip(cuts[::2], cuts[1::2], strict=True)
    return out


def _rule(notes: list[str], field: str) -> str:
    head, leaf = field.split(".", 1)[0], field.rsplit(".", 1)[-1]
    if head == "wire":
        return "the role's team plays its default model (the family's wiring)"
    for pattern in (NOTE_WORDS.get(head), rf"\b{re.escape(leaf)}\b", NOTE_WORDS.get(leaf)):
        said = [n for n in notes if pattern and re.search(pattern, n, re.IGNORECASE)]
        if said:  # a note that names the default taken comes first
            return next((n for n in said if re.match(r"No |Reward not|Defaults not|[^.]*not given", n)), said[0])
    return "the family's default"


def review(spec: TaskSpec, text: str, planner: str, read: SpecText | None = None) -> list[dict[str, Any]]:
    """One row per field: {field, value, from: spec|default|llm, span, rule}. `read` is the offline planner's
    marked text (OfflinePlanner.read); without it (an LLM plan, or --plan) values are looked up in `text`."""
    rows = []
    source = read if read is not None else SpecText(text)
    if read is None:  # an LLM's answer, or an edited plan: a value counts as stated only where the text says it
        source.spans = _pieces(source.text, *source.clauses())
    roles = manifest.role_words if (manifest := _manifest(spec.family)) else {}
    for field, value in _rows_of(spec):
        span = _family_span(source.text, value) if field == "family" else \
            None if field == "modes" else _spec_span(source, field, value, roles)
        if read is not None:
            kind, rule = ("spec", None) if span else ("default", _rule(spec.notes, field))
        else:
            kind = "llm" if planner not in ("none (--plan)", "plan") else "plan"
            rule = None if span else "the edited plan file" if kind == "plan" else "not stated in the spec: check it"
        if span is not None and not all(part in text for part in span.split(" | ")):
            span = f"{span} (as read)"
        rows.append({"field": field, "value": show(value), "from": kind, "span": span, "rule": rule})
    return rows


def table(rows: list[dict[str, Any]], width: int = 60) -> list[str]:
    """The rows as aligned text lines: field, value, from."""
    def cut(s: str, n: int) -> str:
        return s if len(s) <= n else s[:n - 3] + "..."
    fw = max(len(r["field"]) for r in rows)
    vw = min(32, max(len(r["value"]) for r in rows))
    lines = [f"{'field':<{fw}}  {'value':<{vw}}  from", f"{'-' * fw}  {'-' * vw}  {'-' * 4}"]
    for r in rows:
        said = f"{r['from']}: {r['span']!r}" if r["span"] else f"{r['from']}: {r['rule']}"
        lines.append(f"{r['field']:<{fw}}  {cut(r['value'], vw):<{vw}}  {cut(said, width)}")
    return lines


def save(rows: list[dict[str, Any]], project_dir: str | Path, planner: str, spec: str = "") -> Path:
    path = Path(project_dir) / REVIEW_FILE
    path.write_text(json.dumps({"planner": planner, "spec": spec, "rows": rows}, ensure_ascii=False, indent=2)
                    + "\n", encoding="utf-8")
    return path


def load_spec(project_dir: str | Path) -> str:
    """The spec text kept in a project's plan_review.json ('' when there is none)."""
    with suppress(OSError, ValueError):
        data = json.loads((Path(project_dir) / REVIEW_FILE).read_text(encoding="utf-8"))
        return data.get("spec", "") if isinstance(data, dict) and isinstance(data.get("spec", ""), str) else ""
    return ""


_NOT_TRAINED = re.compile(r"\bnot\b|n't|\bnever\b|\bstatic\b|frozen|不训练|不要训练|静态|固定|冻结|played by",
                          re.IGNORECASE)
_GAME_NAME = re.compile(r"谁是卧底|卧底游戏|狼人杀|who[\s-]*is[\s-]*(?:the[\s-]*)?spy|werewol\w*\s*(?=[,，(（]|[:：](?!\s*(?:\d|/))|game|$)",
                        re.IGNORECASE)
_NEAR = r"\s*(?:(?:are|is|get|also|will be|should be|all|both|to be|must be|都要?|要|也|都|可|共同|一起|会)\s*)*"
_VERB = r"(?:trained|trainable|trains?|learns?|训练|可训练)"


def trained_but_static(spec: TaskSpec, text: str) -> list[tuple[str, str, str]]:
    """(mode, role, span) for each role the spec trains in so many words ('train the seer', '狼人可训练') while no
    mode trains it. Conservative: the role word must stand right next to the verb, a game's name ('谁是卧底') is
    no role, and a part that negates or names a static model ('not trained', 'played by') says nothing."""
    out = []
    src = SpecText(_GAME_NAME.sub(lambda m: " " * len(m.group()), text))
    pieces = _pieces(src.text, *src.clauses())  # the first part that says so, in the spec's order
    roles = manifest.role_words if (manifest := _manifest(spec.family)) else {}
    for role in spec.roles:
        if any(spec.model_for_role(role, mode.name).kind == "server" for mode in spec.modes):
            continue
        words = roles.get(role, re.escape(role))
        said = rf"(?<![\w\u4e00-\u9fff])(?:{words}){_NEAR}{_VERB}|\b(?:train|训练)\s*(?:the\s+|only\s+the\s+)?(?:{words})"
        hit = next((text[a:b].strip() for a, b in pieces if re.search(said, src.text[a:b], re.IGNORECASE)
                    and not _NOT_TRAINED.search(src.text[a:b])), None)
        if hit:
            out.append((spec.modes[0].name, role, hit))
    return out


def carry(rows: list[dict[str, Any]], old: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """An edited plan's rows: a field whose value the edit kept keeps its old source (`old`: a project's
    plan_review.json), a changed one says it was edited."""
    out = []
    for row in rows:
        before = old.get(row["field"])
        if before and before.get("value") != row["value"]:
            before = {**row, "rule": f"edited in the plan file (was {before.get('value')})"}
        out.append(before or row)
    return out


def load(project_dir: str | Path) -> dict[str, dict[str, Any]]:
    """field -> row of a project's plan_review.json ({} when there is none)."""
    path = Path(project_dir) / REVIEW_FILE
    if path.is_file():
        with suppress(ValueError, KeyError, TypeError, AttributeError):
            return {r["field"]: r for r in json.loads(path.read_text(encoding="utf-8")).get("rows", [])}
    return {}
