"""Whole-spec layouts pasted from other tools, rewritten as "key: value" lines before the key-line rewrites run
(`read_layouts`; each kind found is said in one note):

- a unified diff (a "--- a" / "+++ b" header or a "@@" hunk; a pair alone is key_lines'): the
  new side is this training; the old side ("-gpus: 2") is another, so it is dropped; the header goes, and
  context lines (" model_path: ...") lose their leading space;
- a Makefile's or shell's assignments: "LR ?= 2e-6", "NGPU := 4" as "LR=2e-6" (read then as any upper-case
  setting); a reference to one ("--lr $(LR)", "${NGPU}") says no value, so it is dropped;
- one server's settings under one prefix ("DETECTOR_MODEL = "/m/q3b"", "DETECTOR_GPUS = 2") as one line,
  "detector: /m/q3b, 2 GPUs", as a spec says a server in prose;
- tab-separated rows (pasted from a spreadsheet): a header row over one row of values as one "header: value" line
  a cell; over several rows, as a markdown table (two columns: three rows at least);
- LaTeX: commands as plain text ("\\texttt{/m/q7b}" -> "/m/q7b", "server~1" -> "server 1", "$1\\times10^{-6}$" ->
  "1e-6"), layout-only lines (\\begin, \\toprule, \\caption ...) dropped, and a tabular's rows ("Learning rate &
  $1\\times10^{-6}$ \\\\") as "key: value" lines (two columns) or table rows.
"""

from __future__ import annotations

import re

_DIFF_HEADER = re.compile(r"^(?:---|\+\+\+)[ \t]+\S.*$|^@@[^\n]*@@.*$", re.MULTILINE)
_DIFF_LINE = re.compile(r"[-+ @]")

_MAKE_ASSIGN = re.compile(r"^([ \t]*(?:export[ \t]+)?(?-i:[A-Z][A-Z0-9_]*))[ \t]*(?:\?=|:=|::=|\+=)[ \t]*", re.MULTILINE)
_REFERENCE = re.compile(r"(?:--?[A-Za-z][\w-]*(?:[ \t]+|=))?\$(?:\([A-Za-z_]\w*\)|\{[A-Za-z_]\w*\})")

# "DETECTOR_MODEL = "/m/q3b"" and "DETECTOR_GPUS = 2": one server's settings under one prefix (group 1)
_PREFIXED = re.compile(r"^[ \t]*(?:export[ \t]+)?((?-i:[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*?))_(?-i:(MODEL_PATH|MODEL|PATH|CKPT|"
                       r"NUM_GPUS|N_GPUS|NGPUS?|GPUS|PORT))[ \t]*(?:\?=|:=|=)[ \t]*[\"']?([^\"'\s#]+)[\"']?[ \t]*(#[^\n]*)?$",
                       re.MULTILINE)
_NOT_A_SERVER = {"NUM", "N", "MAX", "TOTAL", "DEFAULT", "BASE", "HF", "CUDA", "OPENAI", "JUDGE", "STATIC", "OPP", "OPPONENT"}

_LATEX = re.compile(r"\\(?:begin|end|(?:sub)*section|texttt|textbf|emph|toprule|midrule|hline)\b")
_LATEX_TEXT = re.compile(r"\\(?:texttt|textbf|textit|emph|mathrm|text|textsc|url|path)\{([^{}]*)\}")
_LATEX_LAYOUT = re.compile(r"^[ \t]*\\(?:begin|end|toprule|midrule|bottomrule|hline|centering|caption|label|"
                           r"cline|small|footnotesize|vspace|hspace)\b[^\n]*$", re.MULTILINE)
_TIMES_TEN = re.compile(r"(\d+(?:\.\d+)?)?[ \t]*(?:\\times|\\cdot|×)?[ \t]*10\^\{?([-+]?\d+)\}?")
_SYMBOLS = {r"\rightarrow": "->", r"\to": "->", r"\sim": "~", r"\approx": "~", r"\times": "x", r"\%": "%",
            r"\&": "and", r"\_": "_", r"\ ": " ", r"\,": " "}


def read_layouts(text: str) -> tuple[str, list[str]]:
    """(the text with the layouts of the module docstring as "key: value" lines, notes)."""
    notes = []
    for rewrite, note in ((_diff, "Read a unified diff: its new side ('+' lines), the old side ('-' lines) dropped."),
                          (_make, "Read Makefile assignment(s) ('LR ?= 2e-6') as settings; '$(LR)' references carry no value."),
                          (_prefixed, "Read settings of one prefix ('DETECTOR_MODEL', 'DETECTOR_GPUS') as one server's line."),
                          (_tab_rows, "Read tab-separated row(s) as a table: each header names its cell."),
                          (_latex, "Read LaTeX markup as plain text, its tabular rows as table rows.")):
        text, found = rewrite(text)
        notes += [note] if found else []
    return text, notes


def _diff(text: str) -> tuple[str, bool]:
    if (header := _DIFF_HEADER.search(text)) is None:  # pairs alone: key_lines reads them ("-gpus: 2" / "+gpus: 4")
        return text, False
    head, lines = text[:header.start()], text[header.start():].split("\n")
    for i, line in enumerate(lines):
        if not line or not _DIFF_LINE.match(line):  # the diff ends with its first line of prose
            break
        if _DIFF_HEADER.fullmatch(line) or line.startswith("-"):
            lines[i] = ""
        else:  # "+gpus: 4" and the context line " gpus: 4" alike
            lines[i] = line[1:]
    return head + "\n".join(lines), True


def _make(text: str) -> tuple[str, bool]:
    text, assigned = _MAKE_ASSIGN.subn(r"\1=", text)
    if assigned:
        text = _REFERENCE.sub("", text)
    return text, bool(assigned)


def _prefixed(text: str) -> tuple[str, bool]:
    groups: dict[str, list[re.Match]] = {}
    for m in _PREFIXED.finditer(text):
        groups.setdefault(m.group(1), []).append(m)
    edits = []
    for prefix, said in groups.items():
        if prefix in _NOT_A_SERVER or len({m.group(2) for m in said}) < 2:
            continue
        values = [f"{m.group(3)} GPUs" if "GPU" in m.group(2) else f"port {m.group(3)}" if m.group(2) == "PORT"
                  else m.group(3) for m in said]
        comments = " ".join(m.group(4) or "" for m in said).strip()
        line = f"{prefix.lower().replace('_', ' ')}: {', '.join(values)}" + (f"  {comments}" if comments else "")
        edits += [(said[0].start(), said[0].end(), line)] + [(m.start(), m.end(), "") for m in said[1:]]
    for start, end, line in sorted(edits, reverse=True):
        text = text[:start] + line + text[end:]
    return text, bool(edits)


def _tab_rows(text: str) -> tuple[str, bool]:
    lines, found, i = text.split("\n"), False, 0
    while i < len(lines):
        width = lines[i].count("\t")
        end = i
        while width and end + 1 < len(lines) and lines[end + 1].count("\t") == width:
            end += 1
        if end == i or width == 1 and end == i + 1:  # "gpus<TAB>8" over "lr<TAB>1e-6" is two pairs, not a table
            i += 1
            continue
        rows = [[cell.strip() for cell in line.split("\t")] for line in lines[i:end + 1]]
        if end == i + 1:  # a header over one row of values: a line per cell
            block = [f"{key}: {value}" for key, value in zip(*rows, strict=True) if key and value]
        else:
            block = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
            block += ["| " + " | ".join(row) + " |" for row in rows[1:]]
        lines[i:end + 1] = block
        i, found = i + len(block), True
    return "\n".join(lines), found


def _latex(text: str) -> tuple[str, bool]:
    if len(_LATEX.findall(text)) < 2:
        return text, False
    text = _LATEX_LAYOUT.sub("", text)
    for _ in range(2):  # "\textbf{\texttt{x}}"
        text = _LATEX_TEXT.sub(r"\1", text)
    text = re.sub(r"\$([^$\n]*)\$", lambda m: _math(m.group(1)), text)
    for command, plain in _SYMBOLS.items():
        text = text.replace(command, plain)
    text = re.sub(r"\\(?:ref|cite|eqref|autoref)\{[^{}]*\}", "", text)
    text = re.sub(r"(?<=\S)~(?=\S)", " ", text)  # "server~1": a non-breaking space
    text = re.sub(r"\\(?:sub)*section\*?\{([^{}]*)\}", r"\1", text)
    rows = []
    for line in text.split("\n"):
        if "&" in line:  # a tabular row: "Learning rate & 1e-6 \\"
            cells = [c.strip() for c in re.sub(r"\\\\[ \t]*$", "", line).split("&")]
            line = f"{cells[0]}: {cells[1]}" if len(cells) == 2 else "| " + " | ".join(cells) + " |"
        rows.append(re.sub(r"\\\\[ \t]*$", "", line))
    return "\n".join(rows), True


def _math(said: str) -> str:
    """Inline math as plain text: "1\\times10^{-6}" -> "1e-6", "n" -> "n"."""
    said = _TIMES_TEN.sub(lambda m: f"{m.group(1) or '1'}e{m.group(2)}", said)
    for command, plain in _SYMBOLS.items():
        said = said.replace(command, plain)
    return re.sub(r"[{}]", "", said).strip()
