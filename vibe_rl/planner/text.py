"""The spec text plus a record of which parts of it the planner understood. Every extractor that places a
fact in the TaskSpec marks the characters it read (`SpecText.mark`). What is left over is reported: a number
outside every marked span, or a path, URL, env var or model name that is neither marked nor found among the
TaskSpec's values, makes its clause an `unparsed` entry. So a fact the rules cannot place is shown to the user
instead of being dropped or guessed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

# Numbers as digits, Chinese numerals or English words ("8", "八", "十六", "两百", "eight", "thirty-two",
# "two hundred"). English words match whole words only: "sixteen" is never read as "six".
WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
         "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
         "seventeen": 17, "eighteen": 18, "nineteen": 19, "a single": 1, "a pair of": 2, "a dozen": 12,
         "half a dozen": 6}
TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
_CN = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "俩": 2, "仨": 3}
_UNITS = "|".join(list(WORDS)[:9])  # one ... nine
_WORD = (rf"(?:(?:a|one|{_UNITS})[ -]hundred(?:(?: and)? (?:{'|'.join(TENS)})(?:[ -](?:{_UNITS}))?)?"
         rf"|(?:{'|'.join(TENS)})(?:[ -](?:{_UNITS}))?|" + "|".join(sorted(WORDS, key=len, reverse=True)) + ")")
WORD_NUMBER = rf"(?<!thousand )(?<!thousand and )(?<![A-Za-z]-)\b{_WORD}\b"  # never the tail of "one thousand and twenty-four"
CN_NUMBER = r"(?!万)(?:[俩仨]|[零一二两三四五六七八九十百千万]{1,7})(?![般样直定些下起共点切旦边致])"  # not 一般, 一样, 一起, ...
_DIGITS = r"(?<![.\d])(?<![\d.][eE]-)\d+"  # never the tail of "1e-6" or "2.5"
NUM = rf"({_DIGITS}|{CN_NUMBER}|{WORD_NUMBER})"

PATH_CHAR = r"(?:[^\W\u3040-\u9fff]|[.-])"  # a path's character: a path ends where Chinese text goes on ("/m/q7b四张卡")
_PATH = (rf"(?:https?://[^\s`'\"，。；）)]+|(?<![A-Za-z0-9_.])\.{{0,2}}/(?:{PATH_CHAR}+/)*{PATH_CHAR}+"
         r"|\b[A-Za-z][\w.-]*/[\w.-]*[A-Za-z][\w.-]*|\b[A-Za-z]:\\[\w.\\-]+)")
_ENV = r"(?-i:\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b)"
MODEL_NAME = (r"(?<![\w/.-])(?!(?-i:[A-Z][A-Z0-9]*_[A-Z0-9_]+\b))(?:qwen|gpt|claude|deepseek|llama|glm|mistral|mixtral|gemma|yi(?=[-\d])|baichuan|internlm|"
              r"o[134]|gemini|kimi|moonshot|doubao|ernie|hunyuan|phi-\d)[\w.-]*(?![\w/])")
_NUMBER = r"(?<![A-Za-z0-9_.\-/])[-+]?\d+(?:\.\d+)?(?:e-?\d+)?(?![A-Za-z0-9_/])"  # a CJK neighbour is a boundary
# A number in words counts as a stated value when a unit follows it ("eight GPUs", "three are undercover",
# "两张卡", "十六个样本"): "two servers" or "一个模型" describe the set-up and are not reported.
_UNIT = (r"gpus?|cards?|players?|spies|spy|civilians?|undercover|werewol\w*|villagers?|steps?|updates?|"
         r"iterations?|samples?|rollouts?|generations?|completions?|episodes?|tasks?|prompts?|games?|tokens?|"
         r"rounds?|days?|epochs?|[ahbv]\d{2,3}s?|l\d{1,2}s?|(?:rtx\s*)?[1-5]0[5-9]0s?")
_WORD_VALUE = (rf"\b(?!one\b|a single\b|a pair of\b){_WORD}\b(?=[\s-]+(?:(?:of them|are|is|more|training|"
               rf"rollout|total)\s+)?(?:{_UNIT})\b)"
               r"|(?<![第每一])(?!一(?![零一二两三四五六七八九十百千万]))(?!万)[零一二两三四五六七八九十百千万]{1,7}(?=\s*(?:张|块|名|位|步|轮|局|天|次|条|"
               r"(?:个|种)?(?:gpu|卡|显卡|玩家|卧底|平民|狼人|村民|任务|样本|回复|rollout|prompt)))")
TOKEN = re.compile(rf"(?P<path>{_PATH})|(?P<env>{_ENV})|(?P<model>{MODEL_NAME})|(?P<num>{_NUMBER}|{_WORD_VALUE})",
                   re.IGNORECASE)
# Numbers that name or describe something rather than set a value: list markers, "Agent 2", "server 1",
# "7B"-style sizes, ordinals ("第 3 轮"), ranges inside rule prose are not ignored.
_ROLE_REF = r"(?:agent|server|服务器|智能体|optional|step|stage|phase|player|seat|玩家|座位|team|第)\s*#?"
IGNORED_NUMBER = re.compile(r"(?:agents?|智能体)\s*\d+\s*(?:和|与|、|,|&|and|\+|/)\s*\d+|"  # "agents 1 and 3"
                            r"\bsame\s+(?:model\s+)?as\s+(?:agent\s+|#)?\d+\b|"  # "final translator: same as 1"
                            rf"^\s*(?:[-*]\s*)?\d+[.)、]\s|^\s*[(（]\d+[)）]|{_ROLE_REF}\d+(?!\s*(?:人|名|个|位|players?\b))"
                            r"|\d+(?:\.\d+)?\s*[bBmMkK]\b", re.IGNORECASE | re.MULTILINE)
REPORT_WIDTH = 80  # an unparsed entry longer than this is cut down to the part around its fact
CLAUSE_END = re.compile(r"\n|[;。；！？!?]|\.(?=\s|$)")
# A line that goes on the sentence before it: no list marker or key, a lower-case, digit, path or CJK start
WRAPPED = re.compile(r"[ \t]*(?!\d+[.)、）]|[(（]\d+[)）]|[一二三四五六七八九十]+、|[-*•]\s|[\w .-]{1,30}[:：=])[a-z0-9(/\u4e00-\u9fff]")
CJK = re.compile(r"[\u3000-\u9fff\uff00-\uffef]")


@dataclass
class Found:
    """A value read from the text and where it was (marked as understood only once a rule uses it)."""

    value: Any
    start: int
    end: int
    repeats: list[tuple[int, int]] = field(default_factory=list)  # other spans stating the same value


def to_int(word: str) -> int:
    """'8' | '-4' | '八' | '十二' | '两百' | '一千' | '一万' | '两万五千' | 'two' | 'thirty-two' | 'two hundred' -> int."""
    word = re.sub(r"\s+", " ", word.strip().lower())
    if re.fullmatch(r"-?\d+", word):
        return int(word)
    if word in WORDS:
        return WORDS[word]
    if "hundred" in word:
        head, _, rest = word.partition("hundred")
        rest = rest.replace("and", " ").strip(" -")
        return {"a": 1, **WORDS}[head.strip(" -")] * 100 + (to_int(rest) if rest else 0)
    parts = re.split(r"[ -]", word)
    if parts[0] in TENS:
        return TENS[parts[0]] + (WORDS[parts[1]] if len(parts) > 1 else 0)
    for mark, scale in (("万", 10000), ("千", 1000), ("百", 100), ("十", 10)):  # the largest first: "两万五千"
        if mark in word:
            head, _, rest = word.partition(mark)
            return (to_int(head) if head else 1) * scale + (to_int(rest.lstrip("零")) if rest.strip("零") else 0)
    return int("".join(str(_CN[c]) for c in word))


class SpecText:
    """The text and the spans (start, end) that extractors marked as understood."""

    def __init__(self, text: str):
        self.text = text
        self.spans: list[tuple[int, int]] = []
        self.sources: dict[str, tuple[int, int]] = {}  # plan field -> the span its value was read from

    def source(self, field: str, start: int, end: int) -> None:
        """Record where a plan field's value was read (the first reading stays)."""
        self.sources.setdefault(field, (start, end))

    def mark(self, start: int, end: int) -> None:
        self.spans.append((start, end))

    def search(self, pattern: str, mark: bool = True) -> re.Match | None:
        """The first match on one line ("players: 6\nspies: 1": no 6 spies), marked unless `mark=False`."""
        found = next((m for m in self.finditer(pattern) if "\n" not in m.group().strip()), None)
        if found is not None and mark:
            self.mark(*found.span())
        return found

    def finditer(self, pattern: str) -> Iterator[re.Match]:
        return re.finditer(pattern, self.text, re.IGNORECASE)

    def clauses(self) -> list[tuple[int, int]]:
        """(start, end) of each line or sentence; a sentence hard-wrapped over lines is one ("We compare against
        (a) the run (9 players,\nlr 1e-6, 4 GPUs)", "model 用\n/ckpt/q14b，给它 6 张卡")."""
        text, out = self.text, []
        bounds = [0, *(i for m in CLAUSE_END.finditer(text) for i in m.span()), len(text)]
        for a, b in zip(bounds[::2], bounds[1::2], strict=True):
            line = text[text.rfind("\n", 0, a - 1) + 1:a - 1]  # the line before this one
            if out and text[a - 1:a] == "\n" and WRAPPED.match(text, a) and len(line) + len(CJK.findall(line)) > 60 \
                    and not re.search(r"[.。;；:：!?！？=]\s*$|^\s*[\"{\[]", line):
                out[-1] = (out[-1][0], b)
            elif text[a:b].strip():
                out.append((a, b))
        return out

    def clause_of(self, position: int) -> tuple[int, int]:
        return next(((a, b) for a, b in self.clauses() if a <= position < b), (position, position))

    def unparsed(self, landed: Iterable[str], numbers: bool = True) -> list[str]:
        """The clauses holding a fact that is neither marked nor among `landed` (the TaskSpec's strings).
        `numbers=False` checks only paths, URLs, env vars and model names (for plans without marked spans)."""
        values = {v.lower() for v in landed}
        out: list[str] = []
        for m in TOKEN.finditer(self.text):
            raw, kind, token = m.group().rstrip("."), m.lastgroup, m.group().rstrip(".").lower()
            if (any(a <= m.start() and m.start() + len(raw) <= b for a, b in self.spans) or self._ignored(m)
                    or kind == "num" and not numbers or kind != "num" and any(token in v for v in values)
                    or kind == "model" and (any(_abbreviates(v, token) for v in values)
                                            or _next_to_path(self.text, m.start(), m.end(), values))):
                continue
            start, end = self._part_around(*self.clause_of(m.start()), m.start())
            out.append(self.text[start:end].strip(" \t-*:：").rstrip(".。 "))
        return [clause for clause in dict.fromkeys(out) if clause]

    def _part_around(self, start: int, end: int, position: int) -> tuple[int, int]:
        """The part of clause [start, end) that holds `position`: a clause past REPORT_WIDTH characters is
        cut at its commas, a shorter one at its full-width commas only ("用 4 张卡，batch 8，最多 30 轮"); a part
        still longer is cut to about REPORT_WIDTH characters around `position`, at spaces where it can."""
        long = end - start > REPORT_WIDTH
        if long or "，" in self.text[start:end]:
            seps = list(re.compile(r"[,，、]" if long else "，").finditer(self.text, start, end))
            start = max([start] + [sep.end() for sep in seps if sep.end() <= position])
            end = next((sep.start() for sep in seps if sep.end() > position), end)
        start = end - len(self.text[start:end].lstrip())
        if end - start <= REPORT_WIDTH:
            return start, end
        left, right = max(start, position - REPORT_WIDTH // 2), min(end, position + REPORT_WIDTH // 2)
        space = self.text.find(" ", left, position)
        left = space + 1 if left > start and 0 <= space < position else left
        space = self.text.rfind(" ", position, right)
        right = space if right < end and space > position else right
        return left, right

    def _ignored(self, m: re.Match) -> bool:
        line_start = self.text.rfind("\n", 0, m.start()) + 1
        refs = IGNORED_NUMBER.finditer(self.text, line_start, min(len(self.text), m.end() + 16))
        return m.lastgroup == "num" and any(ref.start() <= m.start() < ref.end() for ref in refs)


def part_around(text: str, start: int, end: int, separators: str, after: str = "") -> tuple[int, int]:
    """[a, b): the part of `text` between two of the `separators` (characters; at its end those of `after`,
    when given) that holds [start, end)."""
    a = max(text.rfind(c, 0, start) for c in separators) + 1
    return a, min([i for i in (text.find(c, end) for c in after or separators) if i >= 0] or [len(text)])


def _abbreviates(path: str, name: str) -> bool:
    """'Qwen2.5-3B-Instruct (/data/models/qwen2.5-3b)': a name starting with a planned path's last folder (4
    characters or more, a digit among them) names that path's model, so it is not reported."""
    base = path.rstrip("/").rsplit("/", 1)[-1]
    return "/" in path and len(base) >= 4 and any(c.isdigit() for c in base) and name.startswith(base)


def _next_to_path(text: str, start: int, end: int, paths: set[str]) -> bool:
    """'Qwen2.5-7B-Instruct at /m/qwen7b', 'Qwen3-8B（/ckpt/q8b）', '/m/q7b (Qwen2.5-7B)': a model name right
    next to a planned path names the model at that path, so it is not reported."""
    after = re.match(r"\s*(?:at|@|in|from|under|:|：|=|->)?\s*[(（`]?\s*(\.{0,2}/[^\s`，,;；)）]+)", text[end:end + 200])
    before = re.search(r"(\.{0,2}/[^\s`，,;；(（]+)`?\s*[(（]\s*$", text[max(0, start - 200):start])
    return any(m is not None and m.group(1).rstrip(".").lower() in paths for m in (after, before))


SKIP_KEYS = frozenset({"notes", "unparsed", "description", "title", "spec_text", "spec_quote"})


def strings_of(data: Any, skip: frozenset[str] = SKIP_KEYS) -> list[str]:
    """Every string value in a JSON-like object (keys in `skip` left out)."""
    if isinstance(data, dict):
        return [s for k, v in data.items() if k not in skip for s in strings_of(v, skip)]
    if isinstance(data, list):
        return [s for v in data for s in strings_of(v, skip)]
    return [data] if isinstance(data, str) else []
