"""Corrections inside a spec ("100 steps. Actually use 200 steps", "后来改成 200 步", "make that 8 GPUs"): the
later value wins. Before any rule reads the text, the earlier value is replaced by the corrected one wherever
it stood (its context, e.g. "server 2 uses 4 GPUs", still applies) and the correction's own value phrase is
removed; a note names each value replaced.

A correction runs from a marker ("actually", "no wait", "make that", "bump the lr to 3e-6", "改成", "不对", ...)
to the end of its sentence; "<value> instead" corrects with the comma part before "instead". A value in it
replaces the latest earlier value of its kind (field, GPU count, player count, port, path or model name; the
same scope, "each"/"total", when one is said). A bare number ("no wait, 32", "改成 200") replaces the latest
value of the kind a field word right before the marker names ("batch 改为 16"), else the value just before the
marker on the same line, else it answers the question just before ("lr 沿用上次的 5e-6？" ... "不对，这次改成 2e-6": lr 2e-6).
A value with no earlier one of its kind is new, not a fix: it is left alone."""

from __future__ import annotations

import re
from collections import namedtuple

from vibe_rl.planner.servers import EACH_SERVER, GPU, PER_SERVER, TOTAL
from vibe_rl.planner.table import TRAINING
from vibe_rl.planner.table import patterns as row_patterns
from vibe_rl.planner.text import CLAUSE_END, CN_NUMBER, MODEL_NAME, NUM, WORD_NUMBER

MARKERS = (r"\bactually\b[,，]?|\bno[,，]?\s+wait\b[,，:]?|\bwait\s*[,，:—]|\bmake\s+(?:that|it)\b|\bscratch\s+that\b[,，]?|"
           r"\bcorrection\s*[:：,，]|\bi\s+mean\b[,，]?|\bi\s+meant\b|\bon\s+second\s+thought\b[,，]?|"
           r"\bchange\s+(?:that|it)\s+to\b|\bmake\s+the\b(?=[\w\s-]{1,25}?\d)|"
           r"\b(?:bump|raise|lower|reduce|increase|decrease|drop|cut|change|switch|set)\s+(?=[\w\s.-]{1,25}?\s+to\s+\d)|\bsorry\s*[,，]|\boops\b[,，]?|\bcorrect(?:ed)?\s+to\b|\bupdate\s*[:：]|"
           r"\bbut\s+(?:[\w']+\s+){0,4}?(?:only|just)\s+(?:(?:takes?|uses?|gets?|needs?|runs?\s+on)\s+)?|"
           r"后来(?:又)?(?:改|换)(?:成|为|到)|(?:改|换|调|降|减|升|增|改小|改大|调小|调大|降低|提高)(?:成|为|到|至)|更正(?:为|一下)?[:：，,]?|纠正(?:一下)?[:：，,]?|"
           r"不对[,，]?|哦不[,，]?|噢不[,，]?|算了[,，]?|应该是|修改为|重新设为|(?:但|不过)[^，,。；;\n]{0,8}?只(?:用|需要?|占|要)")
_MARKER = re.compile(rf"{MARKERS}|(?P<instead>\binstead\b(?!\s+of))", re.IGNORECASE)
_SEGMENT_END = re.compile(r"\n|[,，;。；!?！？]|\.(?=\s|$)")
# "no wait, 32", "make it 1e-6", "改成 200", "改成 2 个吧": a number alone in its comma part (a measure word after it)
_BARE = (rf"\A[\s,，:：]*(?:(?:to|it'?s|is|be|use|it|为|用|成)\s*)*(\d+(?:\.\d+)?(?:e[-+]?\d+)?|{CN_NUMBER}|{WORD_NUMBER})"
         r"(?:\s*(?:张|块|个|名|位|人))?(?:\s*(?:吧|了|啦|呢))?\s*(?=$|[,，;；.。!?！？\n])")

KINDS: dict[str, list[str]] = {
    **{row.field: row_patterns(row) for row in TRAINING}, "GPU count": [GPU],
    "players": [rf"{NUM}\s*(?:名|个|位)?\s*(?:玩家|players?\b|人局)", rf"(?:players?|玩家)\s*(?:[:：=]|为)?\s*{NUM}"],
    "spies": [rf"{NUM}\s*(?:名|个|位)?\s*(?:spies\b|spy\b|卧底|undercover)", rf"(?:spies|卧底)\s*(?:[:：=]|为)?\s*{NUM}"],
    "rounds": [rf"{NUM}\s*(?:rounds?\b|轮)"],
    "days": [rf"{NUM}\s*(?:days?\b|天)"],
    "port": [r"(?:ports?|端口)\s*(?:[:：=]|is)?\s*(\d{2,5})"],
    "model path": [r"(?<![\w.:/])((?:\.{1,2})?/(?:[\w.-]+/)+[\w.-]+)"],
    "model": [rf"({MODEL_NAME})"],
}


# A value of one kind in the text: the whole phrase [start, end) and the value itself [vstart, vend)
Value = namedtuple("Value", "kind start end vstart vend text")


def _values(text: str, start: int, end: int) -> list[Value]:
    """Every kind's values in text[start:end], first kinds first, no overlaps."""
    out: list[Value] = []
    for kind, pattern in [(kind, pattern) for kind, patterns in KINDS.items() for pattern in patterns]:
        for m in re.finditer(pattern, text[start:end], re.IGNORECASE):  # the part's start is a start
            a, b = start + m.start(), start + m.end()
            if "\n" in m.group().strip() or any(o.start < b and a < o.end for o in out):
                continue
            group = next((i for i, g in enumerate(m.groups(), 1) if g is not None), 0)
            value = m.group(group).rstrip(".")  # "gpt-4o." ends a sentence
            out.append(Value(kind, a, b, start + m.start(group), start + m.start(group) + len(value), value))
    return out


def _scope(text: str, position: int) -> str:
    """'each' / 'total' / '' as the comma part around `position` says."""
    left = max(text.rfind(c, 0, position) for c in ",，;；\n") + 1
    right = next((m.start() for m in _SEGMENT_END.finditer(text, position)), len(text))
    part = text[left:right]
    each = re.search(f"{PER_SERVER}|{EACH_SERVER}", part, re.IGNORECASE)
    return "total" if re.search(TOTAL, part, re.IGNORECASE) else "each" if each else ""


def _earlier(text: str, end: int, kind: str | None, scope: str) -> Value | None:
    """The latest value of `kind` (any kind when None) in text[:end], of the same scope when the correction
    says one ("actually 16 GPUs in total" does not correct "4 GPUs per server")."""
    found = [v for v in _values(text, 0, end) if kind is None or v.kind == kind]
    pick = [v for v in found if _scope(text, v.start) == scope] or (found if not scope else [])
    return max(pick, key=lambda v: v.start) if pick else None


# A question of one line ("lr 沿用上次的 5e-6？", its old value blanked as background)
_QUESTION = re.compile(r"[^\n?？。!！]*[?？]")


def _asked(text: str, position: int) -> tuple[str, str] | None:
    """(the field word, the question) of the last question before `position`, when it holds no number (its value
    is what the answer gives) and ended at most 2 lines before; else None."""
    questions = list(_QUESTION.finditer(text, 0, position))
    if not questions or re.search(r"\d", asked := questions[-1].group()) or text.count("\n", questions[-1].end(), position) > 2:
        return None
    word = next((m.group() for row in TRAINING if (m := re.search(row.words(), asked, re.I))), None)
    return word and (word, " ".join(asked.split()))


def _edits(text: str, start: int, end: int, lead: tuple[int, int]) -> tuple[list[tuple[int, int, str]], list[str]]:
    """(edits (start, end, replacement), notes) for a correction in text[start:end]; text[slice(*lead)] is its
    comma part before the marker, whose field word names a bare number's kind ("batch 改为 16")."""
    fixes = [(old, new.text, new.start, new.end) for new in _values(text, start, end)
             if (old := _earlier(text, start, new.kind, _scope(text, new.start))) is not None]
    if not fixes and (bare := re.match(_BARE, text[start:end], re.IGNORECASE)):
        # "batch" + "16": the field word names the kind; "Batch size... sixteen, no wait, thirty two": in place of
        # the value the part ends with
        said_before = re.sub(rf"(?:\d[\d.]*(?:e-?\d+)?|{WORD_NUMBER}|{CN_NUMBER})\s*$", "", text[slice(*lead)].rstrip(),
                             flags=re.IGNORECASE) + f" {bare.group(1)}"
        kind = next((v.kind for v in _values(said_before, 0, len(said_before)) if v.text == bare.group(1)), None)
        old = _earlier(text, lead[1] if kind else start, kind, "")
        if old is not None and (kind or (start - old.end <= 60 and "\n" not in text[old.end:start]
                                and not re.search(r"[.。!！?？](?=\s)", text[old.end:start]))):  # the same sentence
            fixes = [(old, bare.group(1), start + bare.start(1), start + bare.end(1))]
        elif kind is None and (asked := _asked(text, lead[0])):  # the value the question asks for: "lr 2e-6"
            a, b = start + bare.start(1), start + bare.end(1)
            return [(a, b, f"{asked[0]} {bare.group(1)}")], [f"Read {bare.group(1)} as {asked[0]}: the answer to {asked[1]!r}."]
    said = text[start:end].strip(" ,，")
    said = said if len(said) <= 60 else said[:57] + "..."
    # the old value is replaced wherever it was said ("batch size 32. ... batch 32 won't fit, make the batch size 16")
    same = [(v, new) for old, new, _, _ in fixes for v in _values(text, 0, start)
            if (v.kind, v.text, _scope(text, v.start)) == (old.kind, old.text, _scope(text, old.start))]
    return ([(v.vstart, v.vend, new) for v, new in same] + [(a, b, "") for *_, a, b in fixes],
            [f"The spec corrects {old.kind}: {new} replaces {old.text} (said later: '{said}')."
             for old, new, _, _ in fixes])


def apply_corrections(text: str) -> tuple[str, list[str]]:
    """(the text with every correction applied where the corrected value stood, one note per correction)."""
    notes: list[str] = []
    position = 0
    while (marker := _MARKER.search(text, position)) is not None:
        if marker.group("instead"):
            start, end = max(text.rfind(c, 0, marker.start()) for c in ",，;；.\n") + 1, marker.start()
        else:
            start = marker.end()
            end = next((m.start() for m in CLAUSE_END.finditer(text, start)), len(text))
        lead = (max(text.rfind(c, 0, marker.start()) for c in ",，;；。\n") + 1, marker.start())
        edits, said = _edits(text, start, end, lead)
        notes += said
        if not edits and not marker.group("instead") and re.search(r"[\u4e00-\u9fff]", marker.group()):
            text, position = f"{text[:marker.start()]} {text[marker.end():]}", marker.start() + 1
            continue  # a new value ("学习率降到 1e-6"): without the marker its field word reads it
        for a, b, new in sorted(edits, reverse=True):
            text = text[:a] + new + text[b:]
        position = marker.end() + sum(len(new) - (b - a) for a, b, new in edits if b <= marker.start())
    return text, notes
