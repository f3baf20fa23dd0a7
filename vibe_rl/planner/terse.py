"""Spec layouts and spellings the field patterns do not read as prose, rewritten to "key: value" parts
before the rules run; every rewrite of a kind is said in one note (bold keys in none: emphasis says nothing):

- key lines (`key_lines`, first): bold keys as plain keys; a chat line's time and speaker dropped ("[10:02]
  alice: ..."); "lr: 1e-6 -> 3e-6" -> "lr: 3e-6"; "Q: how many players? A: 8" -> "players: 8" ("who learns?"
  -> "trainable"), also a chat's question answered by a number on the next line ("bob: how many gpus?" /
  "alice: 4."); an aside before a key's colon dropped ("players (total): 7"); "NUM_PLAYERS=8" ->
  "num_players=8" (never a *_URL, *_KEY, *_TOKEN or *_SECRET variable); a diff's "- batch_size: 32" / "+
  batch_size: 16" -> "batch_size: 16"; "2 servers x 4 GPUs" -> "2 servers with 4 GPUs each"; a "### Players"
  heading over a one-line value -> "Players: 5"; "players (7)" -> "players: 7"; an inline "1) 6 players 2) 1
  spy" cut into parts; "Detector — /m/q14b — 4 GPUs" -> "Detector: /m/q14b, 4 GPUs";
- JSON objects and per-server YAML blocks as "key: value" lines;
- markdown tables: "| gpus | 8 |" -> "gpus: 8" (header and separator rows dropped; a table of more than two
  columns gives "first cell: header2 = cell2, header3 = cell3"); a header row of keys over a row of values:
  "players = 6, spies = 2, ..."; a role table with a count column as a "roles:" block (the whole table);
- a one-line list cut by pipes: "8x H100 | bs=32 | lr 1e-6" -> "8x H100, bs=32, lr 1e-6";
- command-line flags: "--batch-size 8 --lr 1e-6" -> "batch size: 8, lr: 1e-6,";
- inline assignments: "players=8 spies=2" -> "players=8, spies=2" (so "8 spies" is never read across them);
- glued terse tokens: "bs8 n4 lr1e-6" -> "bs: 8, n: 4, lr: 1e-6,"; "6p 1spy 4gpu" -> "6 players, 1 spy,
  4 GPUs"; game abbreviations: "wis" -> "who is spy", "ww" -> "werewolves".

`fix_typos` reads a misspelling of a word the rules key on ("bacth size", "civilans") as the word meant
when it is one edit away from a vocabulary word (two letters swapped, one letter missing, or one doubled or
inserted) and is not itself a word a spec uses for something else ("layers" is not "players", "step" is
not "steps"). Words shorter than five letters get swaps only ("gups" -> "gpus"); paths, URLs, env vars and
hyphenated names are never touched.
"""

from __future__ import annotations

import ast
import json
import re
from contextlib import suppress

from vibe_rl.planner.layouts import read_layouts

ABBREVIATIONS = {"wis": "who is spy", "wisp": "who is spy", "ww": "werewolves", "wwf": "werewolves"}
_KEYS = r"bs|n|lr|steps?|gpus?|temp|t|players?|spies|rounds?|days?|seed|ports?|mt|ctx"
_KEY_NAMES = {"mt": "max tokens", "ctx": "max model len", "temp": "temperature", "t": "temperature"}
_UNITS = {"p": "players", "player": "players", "players": "players", "spy": "spy", "spies": "spies", "gpu": "GPUs",
          "gpus": "GPUs", "rounds": "rounds", "step": "steps", "steps": "steps",
          "k": "000", "人": "players", "卧底": "spies", "卡": "张卡", "步": "步", "轮": "轮"}
_ROW = re.compile(r"^[ \t]*(?:\|(.*)\||\+[-+=: \t]*\+)[ \t]*$", re.MULTILINE)  # "+---+": an ASCII border
_SEPARATOR = re.compile(r"^[\s|:+=-]+$")
_COUNT_HEADER = re.compile(r"count|number|num|#|seats?|players?|数量|人数|个数|座位数?", re.IGNORECASE)


def tables(text: str) -> tuple[str, int]:
    """Markdown (and ASCII-bordered) table rows as "key: value" lines, as the module docstring says; (text, rows)."""
    lines, out, header, count = text.split("\n"), [], None, 0
    for line, after in zip(lines, [*lines[1:], ""], strict=True):
        if not _ROW.match(line):
            out.append(line)
            header = None
            continue
        separator = _SEPARATOR.match(line)
        cells = [c.strip().strip("`*") for c in line.strip().strip("|").split("|")]
        # a header row (the first row over a separator): its names label the columns
        if separator or header is None and _ROW.match(after) and _SEPARATOR.match(after):
            header = header if separator else cells
            out.append("")
            continue
        count += 1
        labelled = header is not None and len(header) == len(cells)
        counted = next((j for j in range(1, len(cells)) if labelled and re.fullmatch(r"\d+", cells[j])
                        and _COUNT_HEADER.fullmatch(header[j].strip())), None)
        if counted is not None:
            if out[-1] == "" and not out[-1 - (len(out) > 1)].startswith("  "):
                out[-1] = "roles:"
            rest = [c for j, c in enumerate(cells[1:], 1) if j != counted and c]
            out.append(f"  {cells[counted]} {cells[0]}: {', '.join(rest)}")
        elif labelled and re.match(r"[-+]?\d|/", cells[0]):  # a header row of keys over a row of values
            out.append(", ".join(f"{h} = {c}" for h, c in zip(header, cells, strict=True)))
        elif len(cells) > 2 and labelled:
            out.append(f"{cells[0]}: " + ", ".join(f"{h} = {c}" for h, c in zip(header[1:], cells[1:], strict=True)))
        else:
            out.append(f"{cells[0]}: {', '.join(c for c in cells[1:] if c)}")
    return "\n".join(out), count


_SERVER_BLOCK = re.compile(r"^([ \t]*)((?:swarm[ _-]?)?server[ _-]?\d+|服务器\s*\d+)[ \t]*[:：][ \t]*\n"
                           r"((?:\1[ \t]+\S[^\n]*(?:\n|$))+)", re.IGNORECASE | re.MULTILINE)


def server_blocks(text: str) -> tuple[str, int]:
    """A YAML block per server ("server1:" then indented "model: /m/a", "gpus: 4") as one line, "server1: model:
    /m/a, gpus: 4", so its settings are that server's; (text, blocks rewritten)."""
    def one_line(m: re.Match) -> str:
        items = ", ".join(line.strip() for line in m.group(3).splitlines() if line.strip())
        return f"{m.group(1)}{m.group(2)}: {items}\n"

    return _SERVER_BLOCK.subn(one_line, text)


def json_blocks(text: str) -> tuple[str, int]:
    """A JSON object or Python dict literal in the spec ('{"players": 6, "lr": 2e-6}') as YAML-style "key: value"
    lines (nested objects indented under their key), so each key is read as structure; (text, objects rewritten)."""
    out, pos, count = [], 0, 0
    for m in re.finditer(r"\{|\bdict\(", text):
        with suppress(ValueError):  # no JSON there; a "{" inside an earlier object is none either
            value, end = _object_at(text, m.start()) if m.start() >= pos else ({}, 0)
            if isinstance(value, dict) and value:  # an object, not empty
                before = re.sub(r"(?m)^[ \t]*[A-Za-z_]\w*[ \t]*=[ \t]*\Z", "", text[pos:m.start()])  # "cfg = dict("
                out += [before, "\n".join(_yaml_lines(value)) + "\n"]
                pos, count = end, count + 1
    return "".join(out) + text[pos:], count


def _object_at(text: str, start: int) -> tuple[object, int]:
    """(the JSON object at `start`, its end); else a Python dict literal there ("{'players': 7}", "dict(players=7,
    roles=dict(seer=1))"), ended at its matching bracket; ValueError when neither is there (also for any literal
    ast.literal_eval refuses: a set of dicts, or nesting too deep to parse)."""
    with suppress(ValueError, RecursionError):
        return json.JSONDecoder().raw_decode(text, start)
    depth, pair = 0, "{}" if text[start] == "{" else "()"
    for i, ch in enumerate(text[start:], start):
        depth += {pair[0]: 1, pair[1]: -1}.get(ch, 0)
        if depth == 0 and ch == pair[1]:
            try:
                return _literal(ast.parse(text[start:i + 1], mode="eval").body), i + 1
            except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError) as exc:
                raise ValueError("not a dict literal") from exc
    raise ValueError("no closing bracket")


def _literal(node: ast.expr) -> object:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args:
        return {k.arg: _literal(k.value) for k in node.keywords}
    return ast.literal_eval(node)


def _yaml_lines(value: dict, indent: str = "") -> list[str]:
    lines = []
    for key, item in value.items():
        if isinstance(item, dict):
            lines += [f"{indent}{key}:", *_yaml_lines(item, indent + "  ")]
        else:
            shown = ", ".join(map(str, item)) if isinstance(item, list) else str(item)
            lines.append(f"{indent}{key}: {shown.lower() if isinstance(item, bool) else shown}")
    return lines


def flags(text: str) -> tuple[str, int]:
    """'--batch-size 8' / '--lr=1e-6' -> 'batch size: 8,'; (text, flags rewritten)."""
    def replace(m: re.Match) -> str:
        name = m.group(1).replace("-", " ").replace("_", " ")
        return f"{name}: {m.group(2)}," if m.group(2) else name + ","

    return re.subn(r"(?<!\S)--([A-Za-z][\w-]*)(?:(?:[ \t]*=[ \t]*|[ \t]+)(?!--)(\S+))?", replace, text)


def glued(text: str) -> tuple[str, list[str]]:
    """Terse tokens and game abbreviations; (text, what was read)."""
    read: list[str] = []

    def key_value(m: re.Match) -> str:
        read.append(m.group())
        return f"{_KEY_NAMES.get(m.group(1).lower(), m.group(1).lower())}: {m.group(2)},"

    def value_unit(m: re.Match) -> str:
        unit = _UNITS[m.group(2).lower()]
        read.append(m.group())
        return f"{m.group(1)}{unit}" if unit == "000" else f"{m.group(1)} {unit},"

    text = re.sub(rf"(?<![^\s,，;；:：(（])({_KEYS})(\d[\d.]*(?:e-?\d+)?)(?=\s|$|[,，;；])", key_value, text, flags=re.I)
    units = "|".join(sorted((re.escape(u) for u in _UNITS), key=len, reverse=True))
    text = re.sub(r"(?<![\d.])(\d+)(人|p)(?=\d+\s*(?:卧底|狼|民|spies|spy|wolves))", r"\1\2 ", text)  # "6人1卧底"
    text = re.sub(rf"(?<![^\s,，;；:：(（])(\d+)({units})(?=\s|$|[,，;；]|/\d)", value_unit, text, flags=re.IGNORECASE)
    text = re.sub(r"(?<=[a-z],)/(?=\d)", " ", text)  # "8p/2 spies" -> "8 players, 2 spies"
    for short, full in ABBREVIATIONS.items():
        text, found = re.subn(rf"(?<![\w/.-]){short}(?![\w/-])", full, text, flags=re.IGNORECASE)
        read += [f"{short} ({full})"] if found else []
    return text, read


# key_lines' patterns in the order it runs them (an example of each: the module docstring)
_BOLD = re.compile(r"(?:\*\*|__)([^*_\n]{1,40}?)(?:\*\*|__)(?=[ \t]*[:：=])|\*\*([^*\n]{1,60}?)\*\*|`([^`\n]{1,60}?)`")
_SPEAKER = r"[A-Za-z][\w.-]{0,19}[ \t]*[:：][ \t]*"  # a chat line's "alice: "
_CHAT_PREFIX = re.compile(rf"^[ \t]*[\[(]?\d{{1,2}}:\d{{2}}(?::\d{{2}})?[\])]?[ \t]+{_SPEAKER}", re.MULTILINE)
_ARROW = re.compile(r"(?:(?<![\w.])|从[ \t]*)[-+]?\d[\w.+-]*?[ \t]*(?:->|→|=>|⇒|(?<=[\d \t])[降减升增提调改][低高大小]?"
                    r"(?:到|至|成|为))[ \t]*(?=[-+]?\d)")  # "lr 1e-6 -> 3e-7", "lr 从 1e-6 降到 3e-7"
# a key line's change of a word value: "opponent: gpt-4o-mini -> claude-3-5-sonnet" (not languages: "zh -> en")
_KEY_ARROW = re.compile(r"^([ \t]*(?:[-*][ \t]+)?[A-Za-z][\w /-]{0,30}[:：=][ \t]*)(?![a-z]{2}[ \t]*(?:->|→))[^\s:>]+"
                        r"(?:[ \t]+[^\s:>-]+)?[ \t]*(?:->|→|=>)[ \t]*(?=\S)", re.MULTILINE)
_QA = re.compile(r"^([ \t]*)(?:Q|问)\d{0,2}[ \t]*[:：.][ \t]*(.+?)[ \t]*[?？]?[ \t]*\n?[ \t]*(?:A|答)\d{0,2}[ \t]*[:：.][ \t]*(\S.*)$",
                 re.MULTILINE)
# two keys over two values: "lr / bs: 1e-6 / 32", "学习率和 batch: 1e-6 / 32"
_PAIRED = re.compile(r"^([ \t]*(?:[-*][ \t]+)?)([^\n:：/]{1,30}?)[ \t]*(?:/|和|and|&)[ \t]*([^\n:：/]{1,30}?)[ \t]*[:：=][ \t]*"
                     r"([-+]?\d[\w.+-]*)[ \t]*/[ \t]*([-+]?\d[\w.+-]*)[ \t]*$", re.MULTILINE)
_CHAT_QA = re.compile(rf"^([ \t]*)(?:{_SPEAKER})?((?:how many|how much|number of|几个|几张|多少)[^?？\n:：]{{1,30}}?)"
                      rf"[ \t]*[?？][ \t]*\n[ \t]*(?:{_SPEAKER})?(\d+(?:\.\d+)?(?:e-?\d+)?)(?=[ \t]*(?:[.,，。;；]|$))", re.M | re.I)
_ASKED = r"^(?:how many|how much|which|what(?: is| are)?(?: the)?|number of|几个|几张|多少|哪个)\s*"
_ASIDE_KEY = re.compile(r"^([ \t]*(?:[A-Za-z][\w -]{0,30}?\b)?(?:players?|spies|wolves|werewolves|villagers|civilians|size|"
                        r"batch|gpus?|cards|lr|rate|steps|tokens|samples|temperature|rounds|days|turns|port|path|model|prompt|"
                        r"rollouts|interval|checkpoint|freq|frequency)"
                        r"|玩家|卧底|平民|狼人|村民|人数|显卡|卡数|步数|学习率|温度)"
                        r"[ \t]*[(（](?:[^()（）\n\d]|(?<=[A-Za-z])\d+)*[)）][ \t]*(?=[:：=])", re.MULTILINE | re.IGNORECASE)
_CAPS_KEY = re.compile(r"^([ \t]*)(?:export[ \t]+)?((?-i:[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*))(?<!_URL)(?<!_KEY)(?<!_TOKEN)"
                       r"(?<!_SECRET)[ \t]*=[ \t]*(?=(?:-?\d[\d.]*(?:e-?\d+)?|/\S+|\.{1,2}/\S+|[A-Za-z][\w.:-]*)[ \t]*(?:#[^\n]*)?$)",
                       re.MULTILINE)  # a value alone on its line, or before a comment ("TRAIN_TEAM=civilian  # 只训平民")
_DIFF = re.compile(r"^[ \t]*-[ \t]*([\w .-]+?)[ \t]*([:：=])[^\n]*\n[ \t]*\+[ \t]*(?=\1[ \t]*\2)", re.MULTILINE)
_SERVERS_TIMES = re.compile(r"\b(\d+|two|both)[ \t]*(servers?|服务器)[ \t]*[x×*][ \t]*(\d+)[ \t]*(gpus?|cards?|卡)",
                            re.IGNORECASE)
_HEADING = re.compile(r"^[ \t]*#{2,6}[ \t]+([^#\n]{1,40}?)[ \t]*#*[ \t]*\n(?:[ \t]*\n)*"
                      r"(?=[ \t]*[^#\s][^\n]{0,80}(?:\n[ \t]*\n|\n[ \t]*#|\s*\Z))", re.MULTILINE)
_BRACKETED = re.compile(r"(?<![\w-])([A-Za-z][A-Za-z_-]*(?:[ \t]+[A-Za-z][A-Za-z_-]*){0,2})[ \t]*[(（]"
                        r"[ \t]*(\d+(?:\.\d+)?)[ \t]*[)）]")
_NUMBERED = re.compile(r"(?:(?<=\s)|^)[(（]?(\d{1,2})[)）][ \t]+|^[ \t]*(\d{1,2})[.、](?!\d)[ \t]*", re.MULTILINE)
# a form's boxes: an unticked option ("[ ] 2 GPUs", "( ) Werewolf") is dropped, a ticked one ("[x] 4 GPUs") kept;
# a to-do list item ("- [ ] batch size 24") is still asked for
_UNTICKED = re.compile(r"(?<![-*] )[\[(][ \t][\])][^\[\]()\n]*?(?=[\[(][ xX✓✔][\])]|$)|[\[(][xX✓✔][\])][ \t]*", re.MULTILINE)
_FOOTNOTE = re.compile(r"(?<=[^\s\[(,，])\[\d{1,2}\]|^[ \t]*\[\d{1,2}\][ \t]*", re.MULTILINE)  # "负 -1[3]", "[3] ..."
_GPUS_TOTAL = re.compile(r"\bgpus?[_-]total\b|\bnum_?gpus_total\b", re.IGNORECASE)  # "gpus_total: 8"
_KEEP = re.compile(r"(?<=[:：=])([ \t]*)(?:keep(?:[ \t]+it)?(?:[ \t]+at)?|still|stays?(?:[ \t]+at)?|remains?(?:[ \t]+at)?|"
                   r"unchanged,?|same,?|沿用|保持|还是|照旧)[ \t]*(?=[-+]?\d)", re.IGNORECASE)  # "steps: keep 500"
_DASH = re.compile(r"[ \t]+(?:—|–|--)[ \t]+(?=[-+]?\d|\.{0,2}/)")


def key_lines(text: str) -> tuple[str, list[str]]:
    """The key-line rewrites of the module docstring, as "key: value" parts; (text, notes)."""
    notes = []

    def answer(m: re.Match) -> str:
        key = re.sub(_ASKED, "", m.group(2).strip(), flags=re.IGNORECASE)
        key = re.sub(r"^(?:who|which roles?)\s+(?:learns?|trains?|is trained|are trained|train)$", "trainable", key,
                     flags=re.IGNORECASE)
        said = re.match(r"[-+]?\d+(?:\.\d+)?(?:e-?\d+)?(?![\w.])", m.group(3))
        if said and (asked := re.search(r"多少|几", key)):  # "单局最多多少回合？ 20" -> "单局最多 20 回合"
            return f"{m.group(1)}{key[:asked.start()]} {said.group()} {key[asked.end():]}{m.group(3)[said.end():]}"
        return f"{m.group(1)}{key}: {m.group(3)}"

    for pattern, replace, what in ((_BOLD, lambda m: m.group(1) or m.group(2) or m.group(3), ""),  # emphasis says nothing: no note
                                   (_KEEP, r"\1", ""),
                                   (_GPUS_TOTAL, "total gpus", ""),  # nor does "keep": "steps: keep 500" is "steps: 500"
                                   (_FOOTNOTE, "", "footnote mark(s) ('[1]')"),
                                   (_UNTICKED, "", "form box(es) ('[ ] 2 GPUs  [x] 4 GPUs'): the ticked ones"),
                                   (_CHAT_PREFIX, "", "chat line(s) without their time and speaker"),
                                   (_ARROW, "", "change(s) 'old -> new' as the new value"),
                                   (_KEY_ARROW, r"\1", "change(s) 'key: old -> new' as the new value"),
                                   (_QA, answer, "question-and-answer line(s) as 'question: answer'"),
                                   (_CHAT_QA, answer, "question(s) answered on the next line as 'question: answer'"),
                                   (_PAIRED, r"\1\2: \4, \3: \5", "key pair(s) ('lr / bs: 1e-6 / 32') as two settings"),
                                   (_ASIDE_KEY, r"\1", "aside(s) between a key and its colon as the key's"),
                                   (_CAPS_KEY, lambda m: f"{m.group(1)}{m.group(2).lower()}=",
                                    "upper-case setting(s) ('NUM_PLAYERS=8') as settings"),
                                   (_DIFF, "", "diff pair(s) ('- key: old' then '+ key: new') as the new value"),
                                   (_SERVERS_TIMES, r"\1 \2 with \3 \4 each", "'N servers x M GPUs' as M GPUs each"),
                                   (_HEADING, r"\1: ", "heading(s) over a value ('### Players' then '5') as 'key: value'"),
                                   (_BRACKETED, r"\1: \2", "number(s) in brackets after a word ('players (7)') as its value")):
        text, count = pattern.subn(replace, text)
        if count and what:
            notes.append(f"Read {count} {what}.")
    if {"1", "2"} <= {m.group(1) or m.group(2) for m in _NUMBERED.finditer(text)}:
        text = _NUMBERED.sub("; ", text)
        notes.append("Read a numbered list ('1) ... 2) ...') as parts.")
    lines, dashed = text.split("\n"), 0
    for i, line in enumerate(lines):
        parts = _DASH.split(line)
        if len(parts) > 1 and not re.search(r"[:：=]", parts[0]):
            lines[i], dashed = parts[0] + ": " + ", ".join(parts[1:]), dashed + 1
    notes += ["Read a dash before a value ('Batch — 16') as a colon."] if dashed else []
    return "\n".join(lines), notes


def expand_terse(text: str) -> tuple[str, list[str]]:
    """(the text with tables, flags, inline assignments and terse tokens as "key: value" parts, notes)."""
    text, laid = read_layouts(text)
    text, said = key_lines(text)
    text, blocks = json_blocks(text)
    text, servers = server_blocks(text)
    text, rows = tables(text)
    text, pipes = re.subn(r"(?<=\S)[ \t]+[|｜][ \t]+(?=\S)|[ \t]*｜[ \t]*", ", ", text) if not rows else (text, 0)
    text, count = flags(text)
    assignment = r"[A-Za-z_\u4e00-\u9fff][\w.\u4e00-\u9fff-]*=[^\s,，;；=]+"
    text = re.sub(rf"(?<!\S)({assignment})[ \t]+(?={assignment})", r"\1, ", text)  # "players=8 spies=2"
    text, read = glued(text)
    notes = [note.format(n) for n, note in (
        (blocks, "Read {} JSON object(s) as 'key: value' lines."),
        (servers, "Read {} per-server block(s) ('server1:' and its indented settings) as one line each."),
        (rows, "Read {} markdown table row(s) as 'key: value' lines."),
        (pipes, "Read the {} ' | ' separator(s) as commas."),
        (count, "Read {} command-line flag(s) ('--key value') as settings.")) if n]
    return text, laid + said + notes + ([f"Read terse tokens {', '.join(read)}."] if read else [])


VOCABULARY = (
    "batch", "learning", "rate", "group", "players", "player", "spies", "civilians", "civilian", "villagers",
    "villager", "werewolves", "werewolf", "seer", "witch", "hunter", "rollouts", "rollout", "samples", "prompt",
    "prompts", "steps", "tokens", "temperature", "train", "trained", "trainable", "training", "server", "servers",
    "translation", "translator", "adversarial", "undercover", "gpus", "checkpoint", "static", "frozen", "reward",
    "rewards", "episodes", "rounds", "model", "agent", "agents", "total", "size", "save", "every", "port",
    "ports", "opponent", "opponents", "generations",
)
# Real words one edit away from a vocabulary word: never "corrected".
KNOWN = frozenset(VOCABULARY) | {
    "layers", "layer", "token", "sample", "sever", "severs", "serves", "spices", "spines", "tokes", "switch",
    "twitch", "grounds", "round", "payer", "raining", "episode", "generation", "strain", "sere", "serve",
    "froze", "village", "villages",
}
# Misspellings more than one swap, deletion or insertion away (a letter replaced, a plural formed wrongly).
COMMON = {"spys": "spies", "spyes": "spies", "spyy": "spy", "spie": "spy", "wearwolves": "werewolves",
          "warewolves": "werewolves", "werewolfs": "werewolves", "warewolf": "werewolf", "wolfs": "wolves",
          "wolfes": "wolves", "villigers": "villagers", "villagars": "villagers", "oppenents": "opponents"}
# Whole words only: never a piece of a path, URL, env var, model name or hyphenated name.
_WORD = re.compile(r"(?<![\w/.\-])[A-Za-z]{4,}(?![\w/\-]|\.\w)")


def _edits(word: str) -> set[str]:
    """The strings one edit (of the module docstring's) away from `word`, lowercase letters only."""
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    swaps = {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    deletes = {a + b[1:] for a, b in splits if b} if len(word) >= 6 else set()
    inserts = {a + c + b for a, b in splits for c in "abcdefghijklmnopqrstuvwxyz"} if len(word) > 4 else set()
    return swaps | deletes | inserts


# The first vocabulary word wins a typo near two; not a known word or an inflection ("translators", "trained")
_FIXES = {typo: good for good in reversed(VOCABULARY) for typo in _edits(good)
          if typo not in KNOWN and not (typo[:-1] == good and typo[-1] in "sdry")} | COMMON


def fix_typos(text: str) -> tuple[str, list[str]]:
    """(the text with misspelled keywords corrected, one note per distinct correction)."""
    seen: dict[str, str] = {}

    def replace(m: re.Match) -> str:
        word, good = m.group(), _FIXES.get(m.group().lower())
        if good is None:
            return word
        seen.setdefault(word, good)
        return good.capitalize() if word[0].isupper() else good

    fixed = _WORD.sub(replace, text)
    said = ", ".join(f"{typo!r} as {good!r}" for typo, good in seen.items())
    return fixed, [f"Read {said} (a misspelling?)."] if seen else []
