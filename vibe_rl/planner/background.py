"""Background sentences: what the writer did before, elsewhere or last time ("last year I tried 10 players",
"I used PPO on a different project", "上次每 15 步存一次，结果盘满了"), or might do later ("if it diverges we drop
the lr to 1e-7", "maybe later 16 GPUs"). They describe another training, so no rule may read them: a number
there never sets a field, a method there never refuses the spec, and a value there never contradicts this
spec's. Each such part is blanked (spaces, so every other offset stays) before any rule runs, and said in a
note. A part ends at the end of its sentence or where the writer comes back to now ("this time", "这次").
An email's quoted earlier message ("> ...") is background when the reply says values of its own.
A value the spec turns down ("not 8 GPUs", "4 GPUs rather than 8", "不要 8 卡") is blanked too, and noted.

Also here: asks no vibe-rl project can hold (`check_supported`: images, video or audio as input, e.g.
Qwen2.5-VL; a value model, e.g. actor-critic or PPO, though a bare "critic" is a workflow agent reviewing
another's answer; preference optimisation: DPO, KTO, ORPO, SimPO), refused before a family is planned, each
error saying what was asked, why the plan cannot hold it and what to write instead. A mention that declines
the ask ("GRPO, not PPO", "不用 PPO") is not one, nor is a PPO term GRPO shares ("PPO-style clipping"), nor a
container's image ("image: vibe-rl:0.9.3", "the docker image").
"""

from __future__ import annotations

import re

from vibe_rl.errors import PlannerError
from vibe_rl.planner.text import SpecText, part_around

_EN = (r"\blast\s+(?:year|time|month|week|run|summer|spring|autumn|fall|winter|quarter)\b|\bpreviously\b|"
       r"\b(?:on|in|for|with)\s+(?:a|an|my|our|the|some)?\s*(?:other|another|different|previous|earlier|old|older|past)"
       r"\s+(?:project|run|experiment|task|paper|setup|codebase|repo)s?\b|\banother\s+project\b|"
       r"\b(?:our|my|the)\s+(?:previous|old|earlier|last|original|pilot)\s+(?:config|setup|run|attempt|experiment|project|yaml)\b|"
       r"\bused\s+to\b|\b(?:i|we)\s+(?:tried|used|had|ran|lost|once|previously|considered|said|talked\s+about)\b|\ba\s+(?:year|month|week|while)\s+ago\b|"
       r"\bback\s+then\b|\bin\s+the\s+past\b|\bwhen\s+(?:i|we)\s+(?:did|ran|tried|trained|used|had)\b|"
       r"\b(?:i|we)\s+did\b|\bin\s+(?:19|20)\d\d\b|\bin\s+v\d+\b|"
       r"\b(?:my|our|the)\s+(?:last|previous|earlier|first|old)\s+(?:attempt|try|version|round of experiments)\b|"
       r"\b(?:v\d+(?:\.\d+)?|r\d+|run\s*#?\s*\d+|which|that\s+run)\s+(?:used|had|ran|trained|collapsed|diverged)\b|"
       r"\bsmoke[\s-]*test\w*\b|\bprev(?:ious)?\s+(?:run|config|setup|attempt|experiment|version)s?\b|\bwas\s+(?=\d|(?:the|our)\s+(?:\w+\s+)?baseline\b)|\bcompar(?:e|ed|ing)\s+(?:it\s+)?(?:against|with)\b|"
       r"\b(?:unrelated\s+to|not\s+(?:for|part\s+of))\s+this\s+run\b|"
       r"\bmaybe\s+later\b|\bfor\s+reference\b|\bbackground\s*[:：]|\brecap\s+of\b|\bon\s+hold\b|\blater\s+(?:we|i)\s+(?:might|may|could|can|will)\b|\bin\s+the\s+future\b|\beventually\b")
# A case that may come later ("如果显存不够就改成 batch 8"); not a condition of the game's rules ("如果平票就再投一次")
_IF = (r"\bif\s+(?:it|that|this|training|the\s+run|memory|we)\s+(?:diverges?|ooms?|crash\w*|fails?|is\s+too|runs?\s+"
       r"out|collapses?|blows|does\s*n[o']t|see|hit)|(?:如果|要是|万一|假如)(?=[^，。；\n]{0,12}?(?:显存|内存|太慢|慢|不收敛|"
       r"发散|崩|不够|OOM|爆))")
_ZH = r"(?:跟|和|与)(?:这个|本次|这次)\s*\w*\s*无关|\bv\d+\s*(?:的时候|时)|那时候?|上一?次|上一?回|上一?版|上个版本|旧版|去年|以前|之前(?=我|我们|的|用|跑|试|训)|曾经|另一个项目|别的项目|上个月|上周|前几天|当时|以后可能|以后可以|将来|后续可能"
MARKER = re.compile(rf"{_EN}|{_ZH}|{_IF}", re.IGNORECASE)
# Markers that close their part ("PPO on a different project", "10 players a year ago"): the part starts before
# them, at the start of their comma part; every other marker starts its part ("上周那版 lr 太大", "last time ...")
TRAILING = re.compile(r"\b(?:on|in|for|with|our|my|the|was|unrelated|not)\s|\banother\b|\bago\b|\bback\s+then\b|"
                      r"\bin\s+the\s+past\b|另一个项目|别的项目|跟|和|与", re.IGNORECASE)
# The writer comes back to this training
NOW = re.compile(r"\b(?:so|but|except)\s*[:：]|\bbut\s+(?:a\s+few|some|with|these|the\s+following)\b|\bchanges?\s*[:：]|\bthis\s+time\b|\bnow\b|\bthis\s+run\b|\btoday\b|\bhere\b(?=\s*[:,])|这次|这回|本次|现在|今天|此次|这一?版|本版|这一?轮|新版",
                 re.IGNORECASE)
NEGATED = re.compile(r"(?:\bnot\b|\bnever\b|\b(?:don'?t|do\s+not|doesn'?t|does\s+not|won'?t)\s+(?:use|take|need|want|"
                     r"(?:cap|set|go|run|limit)\s+(?:it\s+)?(?:at|to|with|for)?)\b|"
                     r"\brather\s+than\b|\binstead\s+of\b|不要|不用|别用|而不是)[ \t]*(?:(?:the|all|those|these|use|用)[ \t]+)*"
                     r"(?<![\w.])\d[\d.]*(?:e-?\d+)?(?:[ \t]*(?:[A-Za-z]+|张卡|张|卡|块|个|步|轮|人))?", re.IGNORECASE)
# The value said instead, right after a turned-down one, without its unit: "not 8 GPUs, use 4", "lr not 1e-5 -> 2e-6",
# "don't cap at 15 days, 10 is enough" (it takes the turned-down value's unit: "4 GPUs", "10 days")
INSTEAD = re.compile(r"[ \t]*(?:[(（][^()（）\n]*[)）][ \t]*)?(?:[,，;；][ \t]*)?(?:->|→|=>|\buse\b|\bgo\s+with\b|\bmake\s+it\b|"
                     r"\bjust\b|改成|用)?[ \t]*(?<![\w.])(\d[\d.]*(?:e-?\d+)?)(?![\d.]*[ \t]*(?:%|张|卡|个|步|轮|人|(?!(?:is|are|will|should)\b)[A-Za-z]))"
                     r"(?:[ \t]+(?:is|are|will\s+do|should\s+do)(?:[ \t]+(?:enough|fine|plenty|ok))?)?", re.IGNORECASE)
# A date heading alone on its line ("## 2026-11-27", "2026/11/28:", "11-29 (Fri)"): with two or more, the spec is a
# log and only the last entry is this training
_DATED = re.compile(r"^[ \t]*#*[ \t]*(?:\d{4}[-/.])?\d{1,2}[-/.]\d{1,2}(?:[ \t]*\([^)\n]{1,12}\))?[ \t]*[:：]?[ \t]*$", re.MULTILINE)
# An email's quoted earlier message ("> On Tue ... wrote:", "> - 4 GPUs"): background when the reply around it says
# values of its own (else the quote is the spec: "> 8 GPUs, lr 1e-6" / "Looks good, go")
_QUOTED = re.compile(r"^[ \t]*>[^\n]*$", re.MULTILINE)
_VALUE = re.compile(r"(?<![\w.])(?:\d[\d.]*(?:e-?\d+)?|\.{0,2}/[\w./-]+)")
_BLOCK_LINE = re.compile(r"\n[ \t]+\S[^\n]*|\n[ \t]*[-*][ \t]+[^\n]*")  # an indented or list line of a block


def blank_background(text: str) -> tuple[str, list[str]]:
    """(the text with background parts replaced by spaces, one note naming them)."""
    chars, parts = list(text), []
    for start, end in SpecText(text).clauses():
        marker = MARKER.search(text, start, end)
        if marker is None:
            continue
        head = (max([start] + [text.rfind(c, start, marker.start()) + 1 for c in ",，;；:：、#"])
                if TRAILING.match(marker.group()) else marker.start())  # trailing: its comma part's start
        now = NOW.search(text, marker.end(), end)
        opened, closed = (max(text.rfind(c, start, marker.start()) for c in pair) for pair in ("(（", ")）"))
        shut = min((i for i in (text.find(c, marker.end(), end) for c in ")）") if i >= 0), default=-1)
        if opened > closed and shut >= 0:  # "lr 1e-6 (we tried 1e-5 before and it diverged), 4 GPUs": the aside only
            head, stop = opened + 1, shut
        elif now is None:  # "PPO on a different project" names its background at its end: the whole sentence
            stop = end
        else:  # "上次每 15 步存一次，结果丢了 run，这次每 5 步": up to the last separator before "这次"
            sep = max(text.rfind(c, marker.end(), now.start()) for c in ",，、 ")
            stop = sep if sep > marker.end() else now.start()
        if now is None and text[head:stop].rstrip().endswith((":", "：")):  # "Previously we used:\n  bs: 64"
            while (more := _BLOCK_LINE.match(text, stop)) is not None:
                stop = more.end()
        part = text[head:stop].strip(" ,，、:：\n")
        if not re.search(r"\d|[零一二两三四五六七八九十]|[A-Za-z]{2}", part) or (
                re.fullmatch(_IF, marker.group(), re.IGNORECASE) and not re.search(r"\d", part)):  # "ping me if it OOMs"
            continue
        chars[head:stop] = [c if c.isspace() else " " for c in chars[head:stop]]
        parts.append(part)
    if len(dated := list(_DATED.finditer(text))) > 1:  # a log: "## 2026-11-27 ... ## 2026-11-28 today's plan"
        head, stop = dated[0].end(), dated[-1].start()
        chars[head:stop] = [c if c.isspace() else " " for c in chars[head:stop]]
        parts.append(f"the log entries before {dated[-1].group().strip(' #')}")
    if len(lines := list(_QUOTED.finditer(text))) > 1:
        reply = "".join(c for i, c in enumerate(chars) if not any(m.start() <= i < m.end() for m in lines))
        if len(_VALUE.findall(reply)) >= 3:
            for m in lines:
                chars[m.start():m.end()] = [" "] * (m.end() - m.start())
            parts.append(f"the quoted earlier message ({len(lines)} '>' lines)")
    quoted = "; ".join(repr(p if len(p) <= 80 else p[:77] + "...") for p in parts)
    notes = [f"Read as background (another, an earlier or a possible later training), not as settings of this one: "
             f"{quoted}. State a value as this training's to have it planned."] if parts else []
    text = "".join(chars)
    turned_down = list(NEGATED.finditer(text))
    for m in reversed(turned_down):  # from the end: an instead's unit changes the text's length after it
        unit = re.search(r"(?<=[\d \t])(?:[A-Za-z]+|张卡|张|卡|块|个|步|轮|人)$", m.group())
        said = INSTEAD.match(text, m.end())  # no unit: the key before it names it ("lr not 1e-5 -> 2e-6")
        new = (f"{' ' * (said.start(1) - m.start())}{said.group(1)}{' ' + unit.group() if unit else ''}" if said
               else " " * (m.end() - m.start()))
        text = text[:m.start()] + new + text[said.end() if said else m.end():]
    notes += [f"Read as turned down, never planned: {'; '.join(repr(m.group()) for m in turned_down)}."] if turned_down else []
    return text, notes


_DECLINED = (r"(?:\bno\b|\bnot\b|\bwithout\b|\binstead\s+of\b|\brather\s+than\b|\bunlike\b|\bvs\.?|\bversus\b|"
             r"\bthan\b|\bdon'?t\s+(?:use|need|want)\b|\bnor\b|不用|不要|无需|不需要|没有|而不是|而非|不是)[\s\w(),-]{0,12}$")
ASKS = [  # (what the spec asks for, the error's text)
    (r"\bmulti[\s-]*modal\b|\bvision[\s-]*language\b|\bVLMs?\b|[\w.]-VL\b|-VL-|\bllava\b|\binternvl\b|"
     r"(?<!docker )(?<!container )\b(?:images?(?!\s*[:=]\s*[\w./-]+:[\w.-]+\s*$)|pictures?|photos?|screenshots?|"
     r"videos?|audio)\b|多模态|图像|图片|视觉|视频|音频|看图",
     "images, video or audio as input ({said!r}): vibe-rl serves causal language models and its games exchange "
     "text only. Describe the game in text (e.g. the picture's word as a text clue) and name a text model, then "
     "plan again."),
    (r"\bactor[\s-]*critic\b|\b(?:a|the|ppo|rl)\s+critic\s+(?:and|or|/)\s+value\b|"
     r"\bvalue[\s-]*(?:model|head|network|function|net)\b|\bGAE\b|价值模型|价值网络|价值函数|"
     r"评论家模型|(?<![\w-])PPO\b(?![\s_-]*(?:mini|micro|clip|epochs?|style|loss|objective|ratio|[\s_-]*like))",
     "a critic / PPO ({said!r}): vibe-rl trains with GRPO, whose baseline is the mean reward of a group of "
     "episodes on the same task, and has no value model. Drop the critic (say GRPO, with the group size you "
     "want, e.g. '8 rollouts per prompt'), then plan again."),
    (r"(?<![\w-])(?:DPO|KTO|ORPO|SimPO)\b",
     "preference optimisation ({said!r}): vibe-rl trains with GRPO from episode rewards (win / loss), not from "
     "preference pairs. Say how an episode is rewarded instead, then plan again."),
]


def check_supported(text: str) -> tuple[str, list[str]]:
    """PlannerError for the first ask of ASKS the spec makes (and does not decline); else (the text, no notes)."""
    for pattern, why in ASKS:
        for m in re.finditer(pattern, text, re.IGNORECASE | re.MULTILINE):
            if re.search(_DECLINED, text[text.rfind("\n", 0, m.start()) + 1:m.start()], re.IGNORECASE):
                continue
            said = text[slice(*part_around(text, m.start(), m.end(), "\n,，.。;；:：", "\n,，。;；"))].strip()
            raise PlannerError(f"The spec asks for {why.format(said=said[:100])}")
    return text, []
