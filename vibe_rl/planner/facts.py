"""Family-independent facts read from a spec text (Chinese or English).

Numbers that map one-to-one onto TaskSpec fields (batch size, group size, learning rate, save frequency, ...)
are marked as understood when read. Facts a family may or may not use (model paths, per-server facts,
static models, rounds, task counts) are returned as `Found` values and marked only when a family's rules
place them (`Facts.use`), so an unplaced one shows up in `TaskSpec.unparsed`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from vibe_rl.planner.counts import read_count
from vibe_rl.planner.servers import MODES, GpuFacts, ServerFacts, gpu_facts, server_facts
from vibe_rl.planner.statics import judge_context, mentions, static_models
from vibe_rl.planner.table import TRAINING, read, unplaced_notes
from vibe_rl.planner.text import MODEL_NAME, Found, SpecText
from vibe_rl.schema.job import StaticModel

# English words whole: "close" holds no "lose", "twins" no "wins"
WIN_WORDS = r"胜(?=\s*[:：=]?\s*[-+]?\d)|胜者|获胜者?|胜利|胜方|赢方|赢家|赢了?|\bwinners?|\bwinning|\bwins?\b|\bwon\b"
LOSS_WORDS = r"[负败](?=\s*[:：=]?\s*[-+]?\d)|败者|失败者?|败方|负方|负者|输方|输家|输了?|\blosers?|\blosing|\bloss(?:es)?\b|\blose[sd]?\b|\blost\b|\bothers(?=\s*[:：=]?\s*[-+]?\d)"
# ASCII word boundaries: a CJK neighbour is a boundary ("奖励为1", "失败为0")
_SIGNED = r"(?<![A-Za-z0-9_.])([-+]?\d+(?:\.\d+)?)(?![A-Za-z0-9_.]*[%/]?[A-Za-z0-9_])"


@dataclass
class Facts:
    src: SpecText
    model_paths: list[Found] = field(default_factory=list)
    servers: dict[int, ServerFacts] = field(default_factory=dict)  # 0-based server index -> its facts
    ports: list[Found] = field(default_factory=list)  # ports named outside any server clause, in order
    gpus: GpuFacts = field(default_factory=GpuFacts)
    training: dict[str, Any] = field(default_factory=dict)  # the TRAINING rows the spec gives: field -> value
    model_size: str | None = None  # "7" of "a 7B model": said, though no path names the model
    win: float | None = None
    loss: float | None = None
    no_chinese: bool = False
    random_names: bool = False
    short_name: str | None = None
    modes_only: list[str] = field(default_factory=list)
    modes_excluded: list[str] = field(default_factory=list)
    modes_named: list[str] = field(default_factory=list)  # modes the spec mentions at all, in text order
    static_models: list[tuple[int, StaticModel]] = field(default_factory=list)  # (position in text, model)
    judges: list[StaticModel] = field(default_factory=list)  # models named to judge, not to play (not marked)
    notes: list[str] = field(default_factory=list)
    claimed: list[tuple[int, int]] = field(default_factory=list)  # numbers a count (`find`) read

    @property
    def text(self) -> str:
        return self.src.text

    def use(self, found: Found | None) -> Any:
        """Mark a found value (and its restatements) as placed; return its value (None stays None)."""
        if found is None:
            return None
        for start, end in [(found.start, found.end), *found.repeats]:
            self.src.mark(start, end)
        return found.value

    def find(self, *patterns: str) -> Found | None:
        """The count the patterns read (counts.read_count), its restatements as `repeats`; not marked (pass it
        to `use` once placed). Two different values are a PlannerError; an earlier `find`'s number is not read
        again."""
        return read_count(self.src, patterns, self.claimed)

    def server_path(self, index: int) -> Found | None:
        return s.path if (s := self.servers.get(index)) else None


def model_paths(src: SpecText) -> list[Found]:
    out: list[Found] = []
    # a single folder under the root counts when a place word leads to it ("Llama-3.1-8B-Instruct at /llama8b")
    for m in src.finditer(r"`(/[^`\s]+)`|(?<![\w.:/])((?:\.{1,2})?/(?:[\w.-]+/)+[\w.-]+)|`([\w-]+/[\w.-]+)`"
                          r"|(?<![\w/])([A-Za-z][\w-]*/[\w.-]*?\d+(?:\.\d+)?[bBmM][\w.-]*)"
                          r"|(?:(?<=\bat\s)|(?<=\bin\s)|(?<=\bfrom\s)|(?<=\bunder\s))(/[A-Za-z][\w.-]*\d[\w.-]*)(?![\w/])"):
        path, start = m.group(m.lastindex).rstrip("."), m.start(m.lastindex)  # the one alternative's group
        if not path.lower().endswith((".md", ".py", ".json", ".yaml", ".yml", ".txt")) and not any(
                f.start <= start < f.end for f in out):
            out.append(Found(path, start, start + len(path)))
    return out


# "Winners 1, losers 0": an outcome noun right before a bare number that no unit follows ("winner 3 rounds" is not)
_BARE = (r"(?:胜者|赢家|败者|输家|胜|负|败|赢|输|\bwinners?|\blosers?|\bwins?|\bloss(?:es)?|\blose|\bothers)\s*[-+]?\d+(?:\.\d+)?(?!\s*(?:[A-Za-z]|(?![输负败赢胜和平])[\u4e00-\u9fff]))")
# A goal of the game, not a reward: "the first player to bank 30 points wins", "reach 100 points", "先到 30 分"
_GOAL = (r"(?:first\s+(?:\w+\s+){0,3}?to|reach(?:es|ing)?|until|at least|先到|先得|达到|先报到)\s*(?:\w+\s+){0,2}?"
         r"(\d+(?:\.\d+)?)")
# A draw's value (never a win's or a loss's; turn_based plans it as game.draw_reward): "draw 0", "a draw gives the
# learner 0", "ties score 0.5", "draw counts as 0.2", "和棋 0", "平局 0", "平 0", "平局给 0.5 分"; "0 for a draw"
DRAW = (r"(?:\bdraws?|\bties?|平局|和棋|和局|(?<![\u4e00-\u9fff])[平和](?=\s*[-+]?\d))\s*(?:rewards?|奖励|得分)?\s*"
        r"(?:gives|=|:|：|is|are|scores?|gets|pays|counts\s+as|is\s+worth|->|→|为|得|给|算)?\s*"
        r"(?:the\s+learner\s*|学习者\s*)?(?:a\s+reward\s+of\s+)?(?<![\w.])([-+]?\d+(?:\.\d+)?)(?!\.?\d|(?!分)\w|%)"
        r"|(?<![\w.])([-+]?\d+(?:\.\d+)?)\s+for\s+(?:a\s+)?(?:draw|tie)\b")


DEDUCT = r"(?:扣|减|罚|\bcosts?|\bminus|\bpenal(?:ty|i[sz]ed)(?:\s+of)?|\bdeducts?|\btakes?\s+away)\s*$"


def rewards(src: SpecText) -> tuple[float | None, float | None]:
    """Win and loss rewards: in each comma/semicolon segment of a clause naming an outcome, the outcome words
    and the numbers are paired in order ("reward 1 for the winners, 0 for the losers", "胜者奖励 1，败者 0",
    "win/loss rewards are 1/0", "Winners 1, losers 0"). A number the game is played to ("first to bank 30
    points wins", "先到 30 分") is a rule, never a reward."""
    found: dict[str, float | None] = {"win": None, "loss": None}
    clauses: list[tuple[int, int]] = []  # a line that ends in a comma joins the next one
    for start, end in src.clauses():
        if clauses and src.text[clauses[-1][0]:clauses[-1][1]].rstrip().endswith((",", "，")):
            clauses[-1] = (clauses[-1][0], end)
        else:
            clauses.append((start, end))
    for start, end in clauses:
        clause = src.text[start:end]
        if not re.search(WIN_WORDS + "|" + LOSS_WORDS, clause, re.IGNORECASE):
            continue
        # a reward word anywhere in the clause, or a valued form ("gets 1", "win: 1", "+1") in the segment itself:
        # "谁先报到 30 谁赢" (first to 30 wins) is a rule, not a reward of 30
        said = re.search(r"reward|奖励|得分|分数|score|points?", clause, re.IGNORECASE)
        offset = start
        for segment in re.split(r"[,，;；、]|\band\b|而", clause):
            seg_start = src.text.index(segment, offset) if segment else offset
            offset = seg_start + len(segment)
            if not said and not re.search(r"[得扣减罚]\s*[-+]?\d|get\w*\s+[-+]?\d|[:：=]\s*[-+]?\d|[-+]\d|" + _BARE, segment,
                                          re.IGNORECASE):
                continue
            words = sorted((m.start(), kind) for kind, pattern in (("win", WIN_WORDS), ("loss", LOSS_WORDS))
                           for m in re.finditer(pattern, segment, re.IGNORECASE))
            goals = [m.span(m.lastindex) for p in (_GOAL, DRAW) for m in re.finditer(p, segment, re.IGNORECASE)]
            numbers = [n for n in re.finditer(_SIGNED, segment) if n.span(1) not in goals]
            kinds = [k for i, (_, k) in enumerate(words) if i == 0 or k != words[i - 1][1]]
            if not words or len(numbers) != len(kinds):
                continue
            placed = 0
            for kind, number in zip(kinds, numbers, strict=True):
                value = float(number.group(1))  # "输的一方扣 1 分", "a loss costs 1 point": a deduction is negative
                value = -abs(value) if re.search(DEDUCT, segment[:number.start(1)], re.IGNORECASE) else value
                if found[kind] not in (None, value):
                    continue  # a second, different value: left unmarked, so it is reported
                found[kind] = value
                placed += 1
                src.mark(seg_start + number.start(1), seg_start + number.end(1))
                src.source(f"reward.{kind}", seg_start, seg_start + len(segment))
            if placed == len(numbers) and "/" in segment:  # "reward (win/loss): 1 / -1": 'win/loss' is no path
                src.mark(seg_start, seg_start + len(segment))
    return found["win"], found["loss"]


def modes(src: SpecText) -> tuple[list[str], list[str]]:
    """(modes asked for with 'only', modes excluded with 'no / not needed / 不需要')."""
    only, excluded = [], []
    for name, words in MODES.items():
        mode = rf"(?:{words})(?:\s*mode|\s*模式)?"
        if (src.search(rf"(?:\bonly\b|\bjust\b|只|仅)[^,.;，。；\n]{{0,30}}?{mode}")
                or src.search(rf"{mode}[^,.;，。；\n]{{0,20}}?(?:\bonly\b|\balone\b)")):
            only.append(name)
        elif (src.search(rf"(?:\bno\b|\bnot\b|don'?t|\bwithout\b|\bdrop\b|\bskip the\b|不需要|不要|无需|去掉|不用|不做|不训练)"
                         rf"[^,.;，。；\n]{{0,12}}?{mode}")
              or src.search(rf"{mode}\s*(?:is not|isn't|is un)?\s*(?:needed|required|wanted)?\s*"
                            rf"(?:not needed|不需要|不用|不要|去掉|is not needed|isn't needed|is unnecessary)")):
            excluded.append(name)
    return only, excluded


def extract(text: str) -> Facts:
    src = SpecText(text)
    facts = Facts(src=src, model_paths=model_paths(src))
    facts.servers, facts.ports = server_facts(src, facts.model_paths)
    facts.gpus = gpu_facts(src, facts.servers)
    facts.training = read(src, TRAINING, facts.notes, prefix="training.")  # conflicts noted, left unmarked
    facts.notes += unplaced_notes(src)
    models = static_models(src)
    statics = {m.name.lower() for _, m in models}
    facts.judges = [m for _, m in models  # a judge in every mention ("a judge (gpt-4o)... opponent: gpt-4o")
                    if all(judge_context(text, *x.span()) for x in mentions(text, m.name))]
    judges = [m.name for m in facts.judges]
    facts.static_models = [(pos, m) for pos, m in models if m.name not in judges]
    for name in judges:
        facts.notes.append(f"{name} is named as a judge, not a player: it is not seated as an opponent. A family that "
                           "grades with an LLM reads its judge from env vars (multi_model_translation: JUDGE_MODEL, "
                           "JUDGE_BASE_URL, JUDGE_API_KEY); in a game the rules decide the winner (edit them after "
                           "rendering to ask a judge).")
    static_spans = [(pos, pos + len(m.name)) for pos, m in facts.static_models]
    size = next((m for m in re.finditer(r"(?<![\w.])(\d+(?:\.\d+)?)\s?[bB](?![a-zA-Z])", text)
                 if not any(a <= m.start() < b for a, b in static_spans)), None)  # "Qwen3-32B" is the opponent's
    facts.model_size = size.group(1) if size else None
    for name in dict.fromkeys(m.group().rstrip(".") for m in src.finditer(MODEL_NAME)):
        if name.lower() not in statics and not facts.model_paths:
            facts.notes.append(f"Model {name} is named without a local directory, and the spec does not say it "
                               f"plays a side: to train it, name its directory (e.g. /models/{name}); to have it play "
                               f"a side, say so ('the spies are played by {name}').")
    facts.win, facts.loss = rewards(src)
    facts.no_chinese = bool(src.search(r"不得出现中文|不要(?:出现)?中文|不能(?:出现|有)中文|no chinese|english only|"
                                       r"only english|without chinese|英文代码|只用英文"))
    facts.random_names = bool(src.search(r"随机(?:分配|生成)|random\w*\s+(?:\w+\s+){0,3}(?:ids?|names)"))
    tmux = src.search(r"(?<![\w/.-])([a-z][a-z0-9]*)-swarm-(?:server|client)")
    if tmux:
        facts.short_name = tmux.group(1)
        for m in src.finditer(rf"\b{tmux.group(1)}-swarm-(?:server|client)(?:-\d+)?"):
            src.mark(*m.span())
    facts.modes_only, facts.modes_excluded = modes(src)
    named = {name: re.search(words, text, re.IGNORECASE) for name, words in MODES.items()}
    facts.modes_named = sorted((n for n, m in named.items() if m), key=lambda n: named[n].start())  # text order
    for m in src.finditer(r"(?<![\w/])\.{0,2}/?(?:[\w.-]+/)*SKILL\.md"):
        src.mark(*m.span())
        facts.notes.append(f"The spec points at {m.group()}: vibe-rl does not read it; its own skills "
                           "(skills/write-swarm-client) describe the swarm client.")
    return facts
