"""Numbers in scientific phrasing or grouped digits, rewritten to plain numbers before any rule reads the spec.

People write a learning rate as "五乘十的负七次方", "1乘10的-6次方", "十的负六次方", "5x10^-7", "5×10⁻⁷",
"10**-6" or "five times ten to the minus seven". Each becomes `<mantissa>e<exponent>` ("5e-7"), so the field
patterns read it like "lr 5e-7". Grouped digits ("1,000 steps", "10_000") and digits with a Chinese multiplier
("1万步", "1.5万", "2千") become plain integers. Every rewrite is said in a note (the plan shows what was read).
"""

from __future__ import annotations

import re

from vibe_rl.planner.text import WORD_NUMBER, to_int

_CN_DIGITS = {"零": "0", "一": "1", "二": "2", "两": "2", "三": "3", "四": "4", "五": "5", "六": "6", "七": "7",
              "八": "8", "九": "9"}
_CN_INT = r"[零一二两三四五六七八九十百]{1,4}"
_MANTISSA = rf"(\d+(?:\.\d+)?|{_CN_INT}(?:点[零一二三四五六七八九]+)?|{WORD_NUMBER}(?: point \w+)?)"
_TIMES = r"\s*(?:乘以?|×|\*|·|x|X|times)\s*"
_SUPERSCRIPT = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")
_ORDINALS = {"first": "one", "second": "two", "third": "three", "fifth": "five", "eighth": "eight",
             "ninth": "nine", "twelfth": "twelve"}

# (pattern, how its groups read): each pattern has the groups (mantissa, sign, exponent)
PATTERNS = [
    rf"(?:{_MANTISSA}{_TIMES})?(?<![\d.])(?:10|十)\s*的\s*(负|-|−|minus\s*)?\s*(\d+|{_CN_INT})\s*次(?:方|幂)",
    rf"(?:{_MANTISSA}{_TIMES})?(?<![\d.])10\s*(?:\^|\*\*)\s*\(?\s*([-−])?\s*(\d+)\s*\)?",
    rf"(?:{_MANTISSA}{_TIMES})?(?<![\d.])10(⁻)?([⁰¹²³⁴⁵⁶⁷⁸⁹]+)",
    rf"(?:{_MANTISSA}\s+times\s+)?\b(?:10|ten)\s+to\s+the\s+(minus|negative|-)?\s*(\d+|[a-z]+?)(?:st|nd|rd|th)?"
    rf"(?:\s+power)?\b",
]


def _number(word: str) -> str:
    """'5' | '2.5' | '五' | '二点五' | 'five' | 'two point five' -> '5' / '2.5'."""
    word = word.strip().translate(_SUPERSCRIPT)
    if re.fullmatch(r"\d+(?:\.\d+)?", word):
        return word
    for point in ("点", " point "):
        if point in word:
            head, _, tail = word.partition(point)
            digits = "".join(_CN_DIGITS.get(c, "") for c in tail) if point == "点" else str(to_int(tail))
            return f"{to_int(head)}.{digits}"
    word = word.lower()
    for ordinal, cardinal in _ORDINALS.items():
        if word == ordinal.removesuffix("th") or word == ordinal:
            return str(to_int(cardinal))
    return str(to_int(word.removesuffix("th")))


def _rewrite(m: re.Match) -> str | None:
    mantissa, sign, exponent = m.group(1), m.group(2), m.group(3)
    try:
        head = _number(mantissa) if mantissa else "1"
        power = _number(exponent)
    except (KeyError, ValueError):
        return None  # not a number after all ("ten to the moon")
    return f"{head}e{'-' if sign else ''}{power}"


def rewrite_scientific(text: str) -> tuple[str, list[str]]:
    """(the text with each scientific phrase as `5e-7`, one note listing the rewrites)."""
    read: list[str] = []
    for pattern in PATTERNS:
        def replace(m: re.Match) -> str:
            plain = _rewrite(m)
            if plain is None:
                return m.group()
            read.append(f"{m.group().strip()!r} as {plain}")
            return plain

        text = re.sub(pattern, replace, text, flags=re.IGNORECASE)
    notes = [f"Read {', '.join(read)} (scientific notation)."] if read else []
    return text, notes


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

    text = re.sub(_GROUPED, plain, text)
    text = re.sub(_MULTIPLIED, multiplied, text)
    return text, [f"Read {', '.join(read)} (grouped digits)."] if read else []
