"""Numbers in scientific phrasing, grouped digits, GPU ids or several nodes, rewritten to plain numbers before
any rule reads the spec; every rewrite is said in a note (the plan shows what was read).

- scientific (`rewrite_scientific`): "五乘十的负七次方", "1乘10的-6次方", "十的负六次方", "5x10^-7", "5×10⁻⁷",
  "10**-6", "five times ten to the minus seven", "百万分之一" -> `<mantissa>e<exponent>` ("5e-7"), read like "lr 5e-7";
- grouped digits ("1,000 steps", "10_000") and Chinese multipliers ("1万步", "1.5万", "2千") -> integers
  (`rewrite_grouped`);
- several machines (`rewrite_nodes`: "two nodes of 8 GPUs", "16 GPUs across 2 nodes", "2机16卡", "两台机器，每台
  8 卡") -> the GPUs of one node: a plan describes one node (`TaskSpec.gpus`), and `vibe-rl run` starts every
  server on it. A count "of / with / x 8 GPUs", "8 GPUs each", "每台 8 卡" or "GPUs: 2 nodes of 4" is per node;
  one "across / over N nodes" or "N机M卡" is the total, divided by N; a restated total ("2 nodes x 8 H100 (16
  GPUs total)") is part of the phrase. The note says what the plan does with the other nodes; a node count
  that does not say which, cannot be split evenly or has no GPU count stays in the text (not understood);
- GPU ids instead of a count ("GPUs 0-3", "卡 0,1,2,3", "CUDA_VISIBLE_DEVICES=4,5") -> the count ("4 GPUs").
"""

from __future__ import annotations

import re

from vibe_rl.planner.servers import GPU
from vibe_rl.planner.text import NUM, WORD_NUMBER, part_around, to_int

_CN_INT = r"[零一二两三四五六七八九十百]{1,4}"
_MANTISSA = rf"(\d+(?:\.\d+)?|{_CN_INT}(?:点[零一二三四五六七八九]+)?|{WORD_NUMBER}(?: point \w+)?)"
_TIMES = r"\s*(?:乘以?|×|\*|·|x|X|times)\s*"
_SUPERSCRIPT = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")
_ORDINALS = {"first": "one", "second": "two", "third": "three", "fifth": "five", "eighth": "eight",
             "ninth": "nine", "twelfth": "twelve"}

PATTERNS = [  # each with the groups (mantissa, sign, exponent)
    rf"(?:{_MANTISSA}{_TIMES})?(?<![\d.])(?:10|十)\s*的\s*(负|-|−|minus\s*)?\s*(\d+|{_CN_INT})\s*次(?:方|幂)",
    rf"(?:{_MANTISSA}{_TIMES})?(?<![\d.])10\s*(?:\^|\*\*)\s*\(?\s*([-−])?\s*(\d+)(?:\s*\))?",
    rf"(?:{_MANTISSA}{_TIMES})?(?<![\d.])10(⁻)?([⁰¹²³⁴⁵⁶⁷⁸⁹]+)",
    rf"(?:{_MANTISSA}\s+times\s+)?\b(?:10|ten)\s+to\s+the\s+(minus|negative|-)?\s*(\d+|[a-z]+?)(?:st|nd|rd|th)?"
    rf"(?:\s+power)?\b",
    rf"(?<![零一二两三四五六七八九])(十万|百万|千万|[十百千万亿])分之\s*(\d+|{_CN_INT})",  # "百万分之一": 1e-6
    rf"(?:(?<![\w.])(\d+(?:\.\d+)?)|({WORD_NUMBER}))\s+e\s+(minus|negative)\s*(\d+|{WORD_NUMBER})\b",  # "one e minus six"
]
# A decimal said in words: "zero point eight", "one point five" (the digits after "point" one word each)
_DIGIT_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
_SPOKEN_DECIMAL = rf"\b(zero|{WORD_NUMBER})\s+point((?:\s+(?:{'|'.join(_DIGIT_WORDS)})\b)+)"
_PER = {"十": 1, "百": 2, "千": 3, "万": 4, "十万": 5, "百万": 6, "千万": 7, "亿": 8}


def _number(word: str) -> str:
    """'5' | '2.5' | '五' | '二点五' | 'five' | 'two point five' -> '5' / '2.5'."""
    word = word.strip().translate(_SUPERSCRIPT)
    if re.fullmatch(r"\d+(?:\.\d+)?", word):
        return word
    for point in ("点", " point "):
        if point in word:
            head, _, tail = word.partition(point)
            digits = "".join(str(to_int(c)) for c in tail) if point == "点" else str(to_int(tail))
            return f"{to_int(head)}.{digits}"
    word = word.lower()
    cardinal = next((c for o, c in _ORDINALS.items() if word in (o, o.removesuffix("th"))), None)
    return str(to_int(cardinal or word.removesuffix("th")))


def rewrite_scientific(text: str) -> tuple[str, list[str]]:
    """(the text with each scientific phrase as `5e-7`, one note listing the rewrites)."""
    read: list[str] = []

    def decimal(m: re.Match) -> str:
        plain = f"{0 if m[1].lower() == 'zero' else to_int(m[1].lower())}." + "".join(
            str(_DIGIT_WORDS.index(w)) for w in m[2].lower().split())
        read.append(f"{m.group()!r} as {plain}")
        return plain

    text = re.sub(_SPOKEN_DECIMAL, decimal, text, flags=re.IGNORECASE)

    def replace(m: re.Match) -> str:
        groups = m.groups()
        if len(groups) == 4:  # "one e minus six": a mantissa in digits or in words
            groups = (groups[0] or groups[1], groups[2], groups[3])
        mantissa, sign, exponent = groups if len(groups) == 3 else (m[2], "-", str(_PER[m[1]]))
        try:
            plain = f"{_number(mantissa) if mantissa else '1'}e{'-' if sign else ''}{_number(exponent)}"
        except (KeyError, ValueError):
            return m.group()  # not a number after all ("ten to the moon")
        read.append(f"{m.group().strip()!r} as {plain}")
        return plain

    for pattern in PATTERNS:
        text = re.sub(pattern, replace, text, flags=re.IGNORECASE)
    return text, [f"Read {', '.join(read)} (scientific notation)."] if read else []


# "1,000" / "12,500" / "10_000": thousands groups (a 5-digit port list "10086,10087" is no such group)
_GROUPED = r"(?<![A-Za-z0-9_.,])\d{1,3}(?:(?:,\d{3})+|(?:_\d{3})+)(?![A-Za-z0-9_]|[,_.]\d)"
_MULTIPLIED = r"(?<![A-Za-z0-9_.])(\d+(?:\.\d+)?)\s*(万|千)"


def rewrite_grouped(text: str) -> tuple[str, list[str]]:
    """(the text with "1,000" as 1000 and "1.5万" as 15000, one note listing the rewrites)."""
    read: list[str] = []

    def plain(m: re.Match) -> str:
        value = m.group().replace(",", "").replace("_", "")
        read.append(f"{m.group()!r} as {value}")
        return value

    def multiplied(m: re.Match) -> str:
        value = float(m.group(1)) * (10000 if m.group(2) == "万" else 1000)
        if value != int(value):
            return m.group()
        read.append(f"{m.group()!r} as {int(value)}")
        return str(int(value))

    text = re.sub(_MULTIPLIED, multiplied, re.sub(_GROUPED, plain, text))
    return text, [f"Read {', '.join(read)} (grouped digits)."] if read else []


_NODE_WORDS = r"(?:nodes?|machines?|hosts?|boxes|台(?:机器|主机)|(?:个|台)?节点|机(?![器制会构理]))"
NODES = rf"{NUM}\s*(?:x\s*|×\s*)?{_NODE_WORDS}"
_PER_NODE_BEFORE = (r"^\s*(?:of|with|x|×|\*|each\s+(?:with|of|has|having)|,?\s*each\s+(?:with|of)?|"
                    r"[,，]?\s*每(?:台|个节点|个机器|节点|机)?|[,，]?\s*各)\s*$")
_PER_NODE_AFTER = r"^\s*(?:each|apiece|per\s+(?:node|machine|host)|on\s+each|/\s*node|每台|每个?节点)"
_TOTAL_BETWEEN = r"\b(?:across|over|spread\s+(?:over|across)|on|in)\s*$|分布在|分在|跨"
HOW = ("`vibe-rl run` starts the servers on this node only; to spread a server over {n} nodes, start it on each "
       "node with `vibe-rl swarm start --nnodes {n} --node-rank R --master-addr HOST` (docs/architecture.md, "
       "'Multi-GPU and multi-node').")


def _reading(text: str, node: re.Match, g_start: int, g_end: int, n: int, m: int) -> int | None:
    """GPUs per node for a node count and a GPU count [g_start, g_end) of one clause, or None when the wording
    does not say which."""
    split = m // n if m % n == 0 else None  # m GPUs in all
    if g_start >= node.end():
        between = text[node.end():g_start]
        if re.search(_PER_NODE_BEFORE, between, re.I) or re.match(_PER_NODE_AFTER, text[g_end:], re.I):
            return m
        adjacent = re.fullmatch(r"\s*", between) and re.search(r"机|节点", node.group())  # "2机16卡": 16 in all
        return split if adjacent else None
    between = text[g_end:node.start()]
    if re.search(_TOTAL_BETWEEN, between, re.I):
        return split
    return m if re.search(r"\b(?:each|per)\b|每", between + text[node.end():node.end() + 12], re.I) else None


_KEY_NODES = rf"(?:num[\s_-]*|n)?(?:nodes|machines)\s*[:：=]\s*{NUM}"
_KEY_PER_NODE = rf"(?:gpus?|cards?)[\s_-]*per[\s_-]*(?:node|machine|host)\s*[:：=]\s*{NUM}|nproc[\s_-]*per[\s_-]*node\s*[:：=]\s*{NUM}"


def _key_values(text: str) -> tuple[str, list[str]]:
    """'nodes: 2' and 'gpus_per_node: 8' (settings lines or flags) -> 'gpus: 8' (the node count is dropped from
    the text and said in the note)."""
    nodes, per = (re.search(pattern, text, re.IGNORECASE) for pattern in (_KEY_NODES, _KEY_PER_NODE))
    n = to_int(nodes.group(1)) if nodes else 1
    if not per or n < 1:
        return text, []
    m = to_int(next(g for g in per.groups() if g))
    text = text[:per.start()] + f"gpus: {m}" + text[per.end():]
    if not nodes:
        return text, [f"Read {per.group()!r} as the GPUs of the node (gpus = {m})."]
    text = text.replace(nodes.group(), "", 1)  # said in the note; no longer a number for the rules
    return text, [f"Read {nodes.group()!r} and {per.group()!r} as {n} node(s) of {m} GPUs ({n * m} in all): the plan "
                  f"describes one node, so gpus = {m}." + (" " + HOW.format(n=n) if n > 1 else "")]


def _bare_per_node(text: str) -> str:
    """"GPUs: 2 nodes of 4" / "2 nodes x 8" in a clause about GPUs: the per-node number is a GPU count ("2 nodes of
    4 GPUs"), so that the node count is never read as the GPUs."""
    def unit(m: re.Match) -> str:
        clause = text[slice(*part_around(text, m.start(), m.start(), "\n;；。"))]
        return m.group() + " GPUs" if re.search(r"gpus?|显卡|卡", clause, re.IGNORECASE) else m.group()
    return re.sub(rf"{NODES}\s*(?:of|with|x|×|\*)\s*{NUM}(?=\s*(?:$|[,，;；。)）\n]|\.(?!\d)))", unit, text,
                  flags=re.IGNORECASE | re.MULTILINE)


_GPU_IDS = (r"(?:\bgpus?|\bcards?|\bdevices?|显卡|卡|cuda_visible_devices)\s*(?:ids?|号)?\s*[:：=#]?\s*"
            r"(?:(\d+)\s*(?:-|~|–|to|到)\s*(\d+)(?!\d|\.\d)|(\d+(?:\s*,\s*\d+)+)(?!\d|\.\d))")
# the total restated right after the per-node phrase: "2 nodes x 8 H100 (16 GPUs total)"
_RESTATED = r"\s*[(（]\s*(\d+)\s*(?:x\s*)?(?:张|块)?\s*(?:gpus?|卡|显卡|cards?)\s*(?:in\s+total|total|in\s+all|总共|共)?\s*[)）]"


def _gpu_ids(text: str, notes: list[str]) -> str:
    """GPU id ranges and lists ("GPUs 0-3", "卡 4~7", "gpu ids: 0,1,2,3", "CUDA_VISIBLE_DEVICES=0,1") as a GPU
    count ("4 GPUs"), the ids said in `notes`."""
    def count(m: re.Match) -> str:
        ids = (list(range(int(m.group(1)), int(m.group(2)) + 1)) if m.group(1)
               else [int(x) for x in re.split(r"\s*,\s*", m.group(3))])
        if len(ids) < 2 or len(set(ids)) != len(ids):
            return m.group()
        notes.append(f"Read GPU ids {m.group().strip()!r} as {len(ids)} GPUs: the plan counts GPUs per "
                     "server and `vibe-rl run` assigns the device ids in server order (export "
                     "CUDA_VISIBLE_DEVICES before `vibe-rl run` to give it other ids).")
        return f"{len(ids)} GPUs"

    return re.sub(_GPU_IDS, count, text, flags=re.IGNORECASE)


def rewrite_nodes(text: str) -> tuple[str, list[str]]:
    """(the text with a multi-node GPU phrase as one node's GPU count, notes); "单卡" (one card) and "single GPU" are
    "1 张卡", "双卡" (two cards) "2 张卡"."""
    text = re.sub(r"(?:单机)?(单|双)(?:张|块)?\s*(?:显卡|卡|gpu)|\b(single)[\s-]+(?:gpus?|cards?)\b",
                  lambda c: {"单": "1", "双": "2"}[c.group(1) or "单"] + " 张卡", text, flags=re.IGNORECASE)
    text, notes = _key_values(text)
    text = _bare_per_node(_gpu_ids(text, notes))
    for node in list(re.finditer(NODES, text, re.IGNORECASE))[::-1]:
        if (n := to_int(node.group(1))) < 2:
            continue
        start, end = part_around(text, node.start(), node.start(), "\n;；。")
        gpu = min((g for g in re.finditer(GPU, text[start:end], re.IGNORECASE)
                   if not (g.start() <= node.start() - start < g.end())),
                  key=lambda g: abs(start + g.start() - node.start()), default=None)  # the nearest
        if gpu is None:
            notes.append(f"The spec names {n} nodes ({node.group().strip()!r}) without a GPU count per node: a plan "
                         "describes one node (gpus = the GPUs of that node). " + HOW.format(n=n))
            continue
        g_start, g_end = start + gpu.start(), start + gpu.end()
        m = to_int(next(x for x in gpu.groups() if x))
        a, b = min(node.start(), g_start), max(node.end(), g_end)
        if (per := _reading(text, node, g_start, g_end, n, m)) is None:
            notes.append(f"The spec names {n} nodes and {m} GPUs ({text[a:b]!r}) without saying whether {m} "
                         f"is per node or in all: the plan takes {m} as the GPUs of one node. Say '8 GPUs "
                         "per node' or '16 GPUs in total'. " + HOW.format(n=n))
            continue
        tail = re.match(_PER_NODE_AFTER, text[b:], re.IGNORECASE) if g_start >= node.end() else None
        b += tail.end() if tail else 0
        restated = re.match(_RESTATED, text[b:], re.IGNORECASE)
        b += restated.end() if restated and to_int(restated.group(1)) == n * per else 0  # "(16 GPUs total)"
        notes.append(f"Read {text[a:b].strip()!r} as {n} nodes of {per} GPUs ({n * per} in all): the plan "
                     f"describes one node, so gpus = {per}. " + HOW.format(n=n))
        text = text[:a] + f"{per} GPUs" + text[b:]
    return text, notes[::-1]
