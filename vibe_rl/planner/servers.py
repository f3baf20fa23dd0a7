"""Per-server and GPU facts: "server 2 uses /models/b on port 10087 with 2 GPUs", "each server uses 4 GPUs",
"8 GPUs in total", "agent_roll: 4 GPUs", in Chinese and English.

A clause (line or sentence) is cut into segments; each gives its path, port and GPU count to the server it
names or to the nearest one named (`server_segments`); a clause naming none numbers servers by its paths
(`implicit_servers`, `described_servers`).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

from vibe_rl.planner.text import NUM, WORD_NUMBER, Found, SpecText, part_around, to_int

# GPU models people count in ("8x H100", "4 张 A800", "2 张 4090", "two RTX 3090s", "4 L40S")
GPU_MODEL = r"(?:[ahbv]\d{2,3}|l\d{1,2}s?|(?:rtx\s*)?[1-5]0[5-9]0(?:\s*ti)?)s?"
GPU = (rf"{NUM}\s*(?:[x*×]\s*)?(?:张|块|个|台)?\s*(?:(?:gpus?|cards?|{GPU_MODEL})(?![a-z0-9])|显卡|卡)"
       rf"|(?:gpus?|显卡|卡数|(?<![每各])卡|gpu\s*数量?)\s*(?:[:：=]|is|数为)\s*{NUM}"
       rf"|(?:gpus?|显卡|(?<![每各])卡)\s*(?:给你|给|用|有|就|共|一共)?\s*{NUM}\s*(?:张|块)"  # "卡给你 8 张", "GPU 用 4 张"
       rf"|(?:gpus?|显卡)[ \t]+(\d{{1,2}}(?![\d.\w])|{WORD_NUMBER}(?![ \t]*(?:gpus?|cards?|nodes?)\b))")  # "显卡 4", "GPUs eight"
# (never a card's model: "显卡 4090")
SERVER = rf"(?:swarm\s*)?(?:server|srv|服务器)\s*#?{NUM}(?![\d.])(?!\s*(?:张|块|个)?\s*(?:卡|gpus?\b|显卡|cards?))"
PORT = r"(?:端口|ports?)\s*(?:号)?\s*(?:[:：=]|is|are|of)?\s*(\d{2,5})((?:\s*(?:,|，|、|/|and|和|与)\s*\d{4,5})*)"
PER_SERVER = (r"\beach\b|\bper\s+(?:swarm\s+)?server\b|apiece|分别|各(?:自|用)?|每(?:个|台)?\s*(?:swarm\s*)?"
              r"(?:server|服务器)|every server|每台")
EACH_SERVER = (r"each (?:swarm )?server|every server|per (?:swarm )?server|每(?:个|台)?\s*(?:swarm\s*)?(?:server|服务器)|每台"
               r"|(?:两|2|both)\s*(?:个|台)?\s*(?:swarm\s*)?(?:servers?|服务器)\s*(?:各|each|分别)|both servers")
TOTAL = r"in total|\btotal\b|in all|altogether|总共|一共|共计?(?![用享])|总计|合计"  # "共用" shares
MODES = {"agent_roll_adv": r"agent_roll_adv|adversarial|对抗", "agent_roll": r"agent_roll(?!_adv)"}


@dataclass
class ServerFacts:
    """What one clause or segment says about server N (each value not yet placed)."""
    path: Found | None = None
    port: Found | None = None
    gpus: Found | None = None
    implicit: bool = False  # numbered by the order of its path, the clause naming no server


def segments(src: SpecText, start: int, end: int) -> list[tuple[int, int]]:
    """text[start:end] cut at commas, "and", "和" and at an opening parenthesis whose aside holds a comma ("/a
    (server 1, 2 GPUs)"); a short aside stays in its segment ("agent 2 (proper noun detector) uses /b on server 2")."""
    out, pos, aside_end = [], start, start
    for m in re.finditer(r"[,，、(（]|\band\b|和|及", src.text[start:end]):
        if start + m.start() < aside_end:
            continue
        if m.group() in "(（" and (aside := re.match(r"[^,，、()（）]*[)）]", src.text[start + m.end():end])):
            aside_end = start + m.end() + aside.end()
            continue
        out.append((pos, start + m.start()))
        pos = start + m.end()
    return [(a, b) for a, b in [*out, (pos, end)] if src.text[a:b].strip()]


def server_segments(src: SpecText, start: int, end: int) -> list[tuple[int, int, int | None]]:
    """(seg start, seg end, server index). A segment naming no server takes the nearest one named before it,
    else after it, in its group; groups end at a closing parenthesis and a comma ("/a (server 1, 2 GPUs), /b
    (server 2)"), and a group naming none continues the one before ("on server 1 (port 10086), 4 GPUs")."""
    out: list[tuple[int, int, int | None]] = []
    bounds = [start] + [start + m.end() for m in re.finditer(r"[)）]\s*[,，]", src.text[start:end])] + [end]
    last: int | None = None
    for g_start, g_end in zip(bounds[:-1], bounds[1:], strict=True):
        segs = segments(src, g_start, g_end)
        named = [to_int(m.group(1)) - 1 if (m := re.search(SERVER, src.text[a:b], re.I)) else None
                 for a, b in segs]
        out += [(a, b, next((n for n in named[i::-1] + named[i:] if n is not None), last))
                for i, (a, b) in enumerate(segs)]
        last = next((n for n in reversed(named) if n is not None), last)
    return out


def implicit_servers(src: SpecText, segments: list[tuple[int, int, int | None]], paths: list[Found],
                     servers: dict[int, ServerFacts]) -> list[tuple[int, int, int | None]]:
    """A clause naming no server but two or more model paths in separate parts ("translator /m/14b (4 GPUs),
    reviewer /m/7b (2 GPUs)"): each new path starts the next server, up to the next path, unless an earlier
    clause gave one of those servers a path. They are `implicit`: a family may reorder them by their roles.
    A GPU count after the last path, where no path's part has one, is no server's ("/a，检测用 /b，4 张卡")."""
    starts = [next((p for p in paths if a <= p.start < b), None) for a, b, _ in segments]
    values = list(dict.fromkeys(p.value for p in starts if p is not None))  # a path said twice is one server
    if len(values) < 2 or any(servers.get(i) and servers[i].path for i in range(len(values))):
        return segments
    out, index = [], 0  # parts before the first path: server 1's
    for (a, b, _), path in zip(segments, starts, strict=True):
        index = values.index(path.value) if path is not None else index
        out.append((a, b, index))
    last, gpus = max(i for i, p in enumerate(starts) if p is not None), [src.text[a:b] for a, b, _ in out]
    counted = [re.search(GPU, g, re.I) and not re.search(PER_SERVER, g, re.I) for g in gpus]  # "2 GPUs each": theirs
    out = [(a, b, None if i > last and not any(counted[:last + 1]) and counted[i] else n) for i, (a, b, n) in enumerate(out)]
    for i in range(len(values)):
        servers.setdefault(i, ServerFacts()).implicit = True
    return out


def described_servers(src: SpecText, paths: list[Found]) -> dict[tuple[int, int], int]:
    """Sentences that each describe one server without naming it ("Agents 1 and 3 run on /m/7b (port 10086, 4
    GPUs); agent 2 runs on /m/14b (port 10087, 4 GPUs)"): one model path plus a port or GPU count per sentence,
    two paths or more, and no "server N" anywhere. Clause -> server index, in the order of the paths."""
    clauses = src.clauses()
    if any(re.search(SERVER, src.text[a:b], re.IGNORECASE) for a, b in clauses):
        return {}
    out, order = {}, []
    for a, b in clauses:
        held = list(dict.fromkeys(p.value for p in paths if a <= p.start < b))
        if len(held) == 1 and re.search(rf"{PORT}|{GPU}", src.text[a:b], re.IGNORECASE):
            order += [held[0]] if held[0] not in order else []
            out[a, b] = order.index(held[0])
    return out if len(order) >= 2 else {}


def server_facts(src: SpecText, paths: list[Found]) -> tuple[dict[int, ServerFacts], list[Found]]:
    servers: defaultdict[int, ServerFacts] = defaultdict(ServerFacts)
    loose_ports: list[Found] = []
    across = described_servers(src, paths)
    for start, end in src.clauses():
        clause = src.text[start:end]
        segments = server_segments(src, start, end)
        apart = sum(1 for a, b, i in segments if i is not None and re.search(SERVER, src.text[a:b], re.I)
                    and any(a <= p.start < b for p in paths))  # "服务器1 /m/a 4卡，服务器2 /m/b 4卡"
        if re.search(PER_SERVER, clause, re.I) and len(re.findall(SERVER, clause, re.I)) > 1 and apart < 2:
            segments = [(start, end, None)]  # "server 1 and server 2 use 4 GPUs each": a fact for every server
        elif all(i is None for _, _, i in segments) and (start, end) in across:
            segments = [(a, b, across[start, end]) for a, b, _ in segments]
            servers[across[start, end]].implicit = True
        elif all(i is None for _, _, i in segments):
            segments = implicit_servers(src, segments, paths, servers)
        ports = [Found(int(p), start + m.start(), start + m.end()) for m in re.finditer(PORT, clause, re.I)
                 for p in [m.group(1), *re.findall(r"\d{4,5}", m.group(2))]]
        for port in ports:
            if (index := next((i for a, b, i in segments if a <= port.start < b), None)) is None:
                loose_ports.append(port)
            elif servers[index].port is None:
                servers[index].port = port
        for a, b, index in (seg for seg in segments if seg[2] is not None):
            servers[index].path = servers[index].path or next((p for p in paths if a <= p.start < b), None)
            gpus = re.search(GPU, src.text[a:b], re.IGNORECASE)
            if gpus and not re.search(TOTAL, src.text[a:b], re.IGNORECASE):
                found = Found(to_int(next(g for g in gpus.groups() if g)), a + gpus.start(), a + gpus.end())
                # "/a ..., /b ..., 4 GPUs each", "各 4 卡"; not a "各自一台服务器：" said before the first path
                each = re.search(PER_SERVER, src.text[a + max(0, gpus.start() - 3):b], re.IGNORECASE)
                for i in sorted({i for _, _, i in segments if i is not None}) if each else [index]:
                    servers[i].gpus = servers[i].gpus or found
    return dict(servers), loose_ports


@dataclass
class GpuFacts:
    """GPU counts by scope, each a Found (value and position) or None."""
    total: Found | None = None
    per_server: Found | None = None
    mode_per_server: dict[str, Found] = field(default_factory=dict)  # "agent_roll_adv: 4 GPUs each"
    mode_total: dict[str, Found] = field(default_factory=dict)  # "agent_roll_adv: 8 GPUs" (for all its servers)


def gpu_facts(src: SpecText, servers: dict[int, ServerFacts] | None = None) -> GpuFacts:
    """GPU counts outside single-server clauses (those are read by `server_facts`). A mode's total that equals
    its per-server count times two ("4 GPUs each (8 in total)") is consistent and marked as read."""
    out = GpuFacts()
    claimed = {s.gpus.start for s in (servers or {}).values() if s.gpus is not None}
    for start, end in src.clauses():
        clause = src.text[start:end]
        mode = next((name for name, words in MODES.items() if re.search(words, clause, re.I)), None)
        servers_named = len(re.findall(SERVER, clause, re.IGNORECASE))
        counts = list(re.finditer(GPU, clause, re.IGNORECASE))
        for m in [m for m in counts if start + m.start() not in claimed]:  # not one server's (server_facts)
            found = Found(to_int(next(g for g in m.groups() if g)), start + m.start(), start + m.end())
            # several counts: "each" is of the one in its comma part ("用八张 A100，...，每台四卡": 8 in all, 4 each)
            scope = clause[slice(*part_around(clause, m.start(), m.end(), ",，;；"))] if len(counts) > 1 else clause
            each = re.search(PER_SERVER, scope, re.IGNORECASE)
            is_total = (re.search(rf"(?:{TOTAL})\s*(?:of|with|使用|用)?\s*$", clause[max(0, m.start() - 12):m.start()], re.I)
                        or re.match(rf"\s*(?:{TOTAL})", clause[m.end():], re.IGNORECASE))
            if re.search(EACH_SERVER, scope, re.IGNORECASE) and not is_total and out.per_server is None:
                out.per_server = found  # "each server uses 2 GPUs": every server, whatever the mode
                if mode is None:
                    continue
            if mode == "agent_roll" and mode not in out.mode_per_server:
                out.mode_per_server[mode] = found  # one server: its count is the mode's count
            elif mode:
                (out.mode_total if is_total or not each else out.mode_per_server).setdefault(mode, found)
            elif each and not is_total and out.per_server is None:
                out.per_server = found
            elif out.total is None and (servers_named != 1 or is_total):  # else one server's (server_facts)
                out.total = found
    for mode, total in list(out.mode_total.items()):
        if (each := out.mode_per_server.get(mode)) is not None and each.value * 2 == total.value:
            del out.mode_total[mode]
            if out.total is None:
                out.total = total  # "two servers of 4 GPUs each, 8 GPUs total": the node's count too
            else:
                src.mark(total.start, total.end)
    return out
