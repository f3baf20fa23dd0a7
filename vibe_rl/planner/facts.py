"""Family-independent facts read from a spec text (Chinese or English), and the counts it states in words.

Numbers that map one-to-one onto TaskSpec fields (batch size, group size, learning rate, save frequency, ...)
are marked as understood when read. Facts a family may or may not use (model paths, per-server facts,
static models, rounds, task counts) are returned as `Found` values and marked only when a family's rules
place them (`Facts.use`), so an unplaced one shows up in `TaskSpec.unparsed`.

A count ("6 players", "2 of whom are spies", "三个卧底", "max 20 turns"; `Facts.find`): every match of its
patterns is a reading, in pattern order, then text order; matches that overlap an earlier one are dropped.
- One number, one fact: a number an earlier count read is not read again by a later one ("谁是卧底：十个玩家":
  the players' 十 is no spy count, though "卧底：十个" matches a spy pattern).
- Restating the same value is fine: every place is marked ("8 players, 2 of whom are spies. The two spies").
- Two different values are a PlannerError quoting both ("2 of whom are spies" says 2, "the three spies" says
  3); a correction ("actually 3 spies", "改成 3 个卧底") is applied before (vibe_rl.planner.corrections).
- A reading in rule prose ("until 2 players remain", "if the spy survives 3 rounds", "前 2 轮") is qualified:
  it never contradicts the count and is used only when there is no other reading (else it stays `unparsed`).

Rewritten phrasings (`rewrite_counts`): "2 of the 6 players are spies" / "1 out of 5 players is the spy" -> "6
players, 2 of whom are spies", so each family's rules read both numbers; "two of them spies" -> "two of whom
are spies"; "a two-spy game" -> "two spies"; "两人对局" / "双人对战" -> "2 名玩家对局" (a player count every family
reads); a bare "N 人" alone in its part or before a role count ("，2 人，", "谁是卧底 6 人 1 卧底") or spoken
("12个人那种") -> "N 名玩家"; a Chinese filler adverb between a word and its number is blanked ("lr 先 2e-6", "卡就用 4
张": "lr   2e-6", "卡 用 4 张"), so the word stands next to its number; so are spoken fillers ("um", "嗯", "let's
say": "Save every, um, fifty steps").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from vibe_rl.errors import PlannerError
from vibe_rl.planner.servers import MODES, GpuFacts, ServerFacts, gpu_facts, server_facts
from vibe_rl.planner.statics import judge_context, mentions, static_models
from vibe_rl.planner.table import TRAINING, read, unplaced_notes
from vibe_rl.planner.text import MODEL_NAME, NUM, PATH_CHAR, Found, SpecText, to_int
from vibe_rl.schema.job import StaticModel

# English words whole: "close" holds no "lose", "twins" no "wins"; config keys too ("reward_win=1.0", "loss_reward: -1")
WIN_WORDS = r"\b(?:reward[_-]win|win[_-]reward)\b|(?-i:\bW)(?=\s*=\s*[-+]?\d(?:\.\d+)?(?![\d.]))|胜(?=\s*[:：=]?\s*[-+]?\d)|胜者|获胜者?|胜利|胜方|赢方|赢家|赢了?|\bwinners?|\bwinning|\bwins?\b|\bwon\b"
LOSS_WORDS = r"\b(?:reward[_-]loss|loss[_-]reward)\b|(?-i:\bL)(?=\s*=\s*[-+]?\d(?:\.\d+)?(?![\d.]))|[负败](?=\s*[:：=]?\s*[-+]?\d)|败者|失败者?|败方|负方|负者|输方|输家|输了?|\blosers?|\blosing|\bloss(?:es)?\b|\blose[sd]?\b|\blost\b|\bothers(?=\s*[:：=]?\s*[-+]?\d)"
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
        for start, end in [(found.start, found.end), *found.repeats] if found else []:
            self.src.mark(start, end)
        return found and found.value

    def find(self, *patterns: str) -> Found | None:
        """The count the patterns read (the module's rules), its restatements as `repeats`; not marked (pass
        it to `use` once placed); the numbers read are added to `claimed`."""
        src, claimed = self.src, self.claimed
        found: list[tuple[re.Match, int]] = []  # (match, value): one line, no overlap, a number not claimed
        for m in (m for pattern in patterns for m in src.finditer(pattern)):
            a, b = _number_span(m)
            overlaps = any(o.start() < m.end() and m.start() < o.end() for o, _ in found)
            if "\n" in m.group().strip() or overlaps or any(x <= a < y or a <= x < b for x, y in claimed):
                continue
            found.append((m, to_int(src.text[a:b])))
        if not found:
            return None
        plain = [(m, v) for m, v in found if not _qualified(src.text, m)]
        first_m, value = (plain or found)[0]
        clash = next(((m, v) for m, v in plain if v != value), None)
        if clash is not None:
            (a, x), (b, y) = sorted([(first_m, value), clash], key=lambda item: item[0].start())
            raise PlannerError(
                f"The spec gives one count two different values: {a.group().strip()!r} says {x}, and later "
                f"{b.group().strip()!r} says {y}. Say the number once, or mark the later one as a correction "
                "('actually ...', '改成 ...': the corrected value is used), then plan again.")
        claimed += [_number_span(m) for m, v in found if v == value]
        return Found(value, *first_m.span(), [m.span() for m, v in found if v == value and m is not first_m])

    def server_path(self, index: int) -> Found | None:
        return s.path if (s := self.servers.get(index)) else None


# Words just before a number that make it part of a rule, not the count the spec sets
_QUALIFIED_BEFORE = re.compile(
    r"(?:\b(?:last|first|final|remaining|other|top|bottom|next|until|till|when|whenever|once|if|unless|after|"
    r"before|within|survives?|surviving)\b[^,.;:!?\n]{0,20}|前|最后|剩下?|剩余|其余|其他|另外|直到|当|如果|若)\s*$",
    re.IGNORECASE)
_QUALIFIED_AFTER = re.compile(r"^\s*(?:remain\w*|are left|left\b|standing|still alive|survive\w*|时|后|剩|以后|之后)",
                              re.IGNORECASE)
_GROUP_NOUNS = r"players?|seats?|agents?|people|participants|persons"
_OF_THE = re.compile(rf"\b{NUM}\s+(?:out\s+)?of\s+(?:the\s+|all\s+|all\s+the\s+)?{NUM}\s+({_GROUP_NOUNS})\s+"
                     r"(are|is|will be|play|plays)\b", re.IGNORECASE)
_OF_THEM = re.compile(rf"\b{NUM}\s+of\s+them\s+(?=spies\b|spy\b|werewol|wolves\b|undercover\b)", re.I)
_TWO_SEATS = re.compile(r"(?<![\d一二三四五六七八九十百])(?:两|二|双)\s*人\s*(?=对局|对战|对弈|博弈|游戏|比赛|局)")


def _number_span(m: re.Match) -> tuple[int, int]:
    return m.span(next(i for i, g in enumerate(m.groups(), 1) if g is not None))


def _qualified(text: str, m: re.Match) -> bool:
    line_start = max(text.rfind(c, 0, m.start()) for c in "\n,，;；。") + 1
    return bool(_QUALIFIED_BEFORE.search(text[line_start:m.start()]) or _QUALIFIED_AFTER.match(text[m.end():]))


# A bare "N 人" that starts its part (or follows the game's name or "this time": "狼人杀 12 人 4狼", "这次 8 人 2 卧底"),
# never "每队 3 人"
_BARE_PEOPLE = re.compile(
    r"(?:^|(?<=[\n,，;；:：。(（])|(?<=谁是卧底)|(?<=狼人杀)|(?<=棋)|(?<=这次)|(?<=这回)|(?<=本次)|(?<=改成))(\s*)(\d+|[一二三四五六七八九十两]+)\s*人(?![\w局])"
    r"(?=\s*(?:$|[\n,，;；。)）]|\d+\s*(?:个|名)?\s*(?:卧底|狼|民|神|平民)|[一二三四五六七八九十两]+\s*(?:个|名)?\s*(?:卧底|狼)))",
    re.MULTILINE)

# "先" (first), "就" (just), "这次" (this time), "暂时" (for now) after a word, right before a number or before 用 / 设 /
# 给 / 开 and one ("lr 先 2e-6", "卡就用 4 张"; not "，这次 7 人", which starts its part)
_FILLER = re.compile(r"(?<=[A-Za-z\u4e00-\u9fff])([ \t]*)(?:先|就|这次|这回|暂时|暂且)(?=\s*(?:用|设为?|给|开)?\s*\d)")


# Spoken fillers between a word and its number: "Save every, um, fifty steps", "GPUs, let's say eight", "嗯"
_SPOKEN = re.compile(r"[,，]?[ \t]*(?:\b(?:um+|uh+|erm|hmm+)\b|嗯+|\blet'?s\s+say\b(?=[ \t]*[\w.])|(?<=,)[ \t]*like[ \t]*(?=,))[,，]?"
                     r"(?:[ \t]*\bthe\b(?=[ \t]+the\b))?", re.IGNORECASE)  # "train the, like, the werewolves"


def rewrite_counts(text: str) -> tuple[str, list[str]]:
    """(the text with the count phrasings of the module docstring rewritten, notes)."""
    notes: list[str] = []
    text = _FILLER.sub(lambda m: m.group(1) + " " * (len(m.group()) - len(m.group(1))), text)
    text = _SPOKEN.sub(lambda m: " " * len(m.group()), text)

    def of_the(m: re.Match) -> str:
        notes.append(f"Read {m.group()!r} as {m.group(2)} {m.group(3)}, {m.group(1)} of whom {m.group(4)} ...")
        return f"{m.group(2)} {m.group(3)}, {m.group(1)} of whom {m.group(4)}"

    text = _OF_THE.sub(of_the, text)
    text = _OF_THEM.sub(r"\1 of whom are ", text)  # "eight players, two of them spies"
    text = re.sub(rf"\b{NUM}-(spy|spies|werewolf|werewolves|wolf|wolves)\b",  # "a two-spy game"
                  lambda m: f"{m.group(1)} {'spies' if m.group(2).startswith('sp') else 'werewolves'}", text,
                  flags=re.IGNORECASE)
    text, seats = _TWO_SEATS.subn("2 名玩家", text)
    notes += ["Read '两人' / '双人' (two-person game) as 2 players."] if seats else []
    text, bare = _BARE_PEOPLE.subn(r"\1\2 名玩家", text)
    text, standard = re.subn(r"(\d+)\s*人\s*标准(局|场|板)", r"\1 名玩家标准\2", text)  # "9 人标准局"
    text, spoken = re.subn(r"(\d+)\s*个人(?=那种|的局)", r"\1 名玩家", text)  # "12个人那种"
    notes += ["Read a bare 'N 人' (alone in its part or before a role count, '6 人 1 卧底') as N players."] \
        if bare + standard + spoken else []
    return text, notes


def model_paths(src: SpecText) -> list[Found]:
    out: list[Found] = []
    # a single folder under the root counts when a place word leads to it ("Llama-3.1-8B-Instruct at /llama8b")
    for m in src.finditer(rf"`(/[^`\s]+)`|(?<![A-Za-z0-9_./])((?:\.{{1,2}})?/(?:{PATH_CHAR}+/)+{PATH_CHAR}+)"
                          r"|`([\w-]+/[\w.-]+)`|(?<![\w\\])([A-Za-z]:\\(?:[\w.-]+\\)*[\w.-]+)"  # D:\models\q7b
                          r"|(?<![\w/])([A-Za-z][\w-]*/[\w.-]*?\d+(?:\.\d+)?[bBmM][\w.-]*)"
                          r"|(?:(?<=\bat\s)|(?<=\bin\s)|(?<=\bfrom\s)|(?<=\bunder\s))(/[A-Za-z][\w.-]*\d[\w.-]*)(?![\w/])"):
        path, start = m.group(m.lastindex).rstrip("."), m.start(m.lastindex)  # the one alternative's group
        shebang = src.text[src.text.rfind("\n", 0, start) + 1:start].lstrip().startswith("#!")  # "#!/usr/bin/env bash"
        if not shebang and not path.lower().endswith((".md", ".py", ".json", ".yaml", ".yml", ".txt")) and not any(
                f.start <= start < f.end for f in out):
            out.append(Found(path, start, start + len(path)))
    return out


# "Winners 1, losers 0": an outcome noun right before a bare number that no unit follows ("winner 3 rounds" is not)
_BARE = (r"(?:胜者|赢家|败者|输家|胜|负|败|赢|输|\bwinners?|\blosers?|\bwins?|\bloss(?:es)?|\blose|\bothers)\s*[-+]?\d+(?:\.\d+)?(?!\s*(?:[A-Za-z]|(?![输负败赢胜和平])[\u4e00-\u9fff]))")
# A goal of the game, not a reward: "the first player to bank 30 points wins", "reach 100 points", "先到 30 分"
_GOAL = (r"(?:first\s+(?:\w+\s+){0,3}?to|reach(?:es|ing)?|until|at least|先到|先得|达到|先报到)\s*(?:\w+\s+){0,2}?"
         r"(\d+(?:\.\d+)?)")
# A draw's value (turn_based's game.draw_reward): "a draw gives the learner 0", "ties score 0.5", "平局给 0.5 分",
# "draw_reward=0.0", "reward_draw: 0.5"
DRAW = (r"(?:\bdraws?|\breward[_-]draw\b|\bties?|平局|和棋|和局|(?<![\u4e00-\u9fff])[平和](?=\s*[-+]?\d)|(?:(?<=\d,\s)|(?<=\d\s))(?-i:D)(?=\s*=))"
        r"(?:\s*[(（][^()（）\n]{0,20}[)）])?[\s_-]*(?:rewards?|奖励|得分)?\s*"
        r"(?:gives|=|:|：|is|are|scores?|gets|pays|counts\s+as|is\s+worth|->|→|为|得|给|算)?\s*"
        r"(?:the\s+learner\s*|学习者\s*)?(?:a\s+reward\s+of\s+)?(?<![\w.])([-+]?\d+(?:\.\d+)?)(?!\.?\d|(?!分)\w|%)"
        r"|(?<![\w.])([-+]?\d+(?:\.\d+)?)\s+for\s+(?:a\s+)?(?:draw|tie)\b|(?:平局|和棋|和局)\s*(不得分|不计分|不扣分)")
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
        # a reward word in the clause, or a valued form ("gets 1", "+1") in the segment ("谁先报到 30 谁赢": a rule)
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
            numbers = [n for n in re.finditer(_SIGNED, segment)  # "54% win rate" is no reward
                       if n.span(1) not in goals and not segment[n.end():].lstrip().startswith("%")]
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
    facts.static_models = [(pos, m) for pos, m in models if m not in facts.judges]
    for name in [m.name for m in facts.judges]:
        facts.notes.append(f"{name} is named as a judge, not a player: it is not seated as an opponent. A family that "
                           "grades with an LLM reads its judge from env vars (multi_model_translation: JUDGE_MODEL, "
                           "JUDGE_BASE_URL, JUDGE_API_KEY); in a game the rules decide the winner (edit them after "
                           "rendering to ask a judge).")
    size = next((m for m in re.finditer(r"(?<![\w.])(\d+(?:\.\d+)?)\s?[bB](?![a-zA-Z])", text)
                 if not any(pos <= m.start() < pos + len(s.name) for pos, s in facts.static_models)), None)
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
