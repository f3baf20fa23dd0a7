"""Family-independent facts read from a spec text (Chinese or English) by regular expressions."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from vibe_rl.schema.job import StaticModel

_GPU = r"(\d+)\s*(?:x\s*)?(?:张|块|个)?\s*(?:gpus?|显卡|卡|cards?|[ahv]\d{2,3}s?)(?![a-z0-9])"
_MODE_WORDS = ("agent_roll", "server", "服务器")

# Static models people name in specs: pattern -> (base_url, api_key_env).
KNOWN_STATIC = [
    (r"qwen[\w.-]*-(?:max|plus|turbo)[\w.-]*|qwen3-235b-a22b[\w.-]*",
     "https://dashscope.aliyuncs.com/compatible-mode/v1", "DASHSCOPE_API_KEY"),
    (r"gpt-4o(?:-mini)?|gpt-4\.1(?:-mini)?|gpt-5(?:-mini)?|o3-mini", "https://api.openai.com/v1", "OPENAI_API_KEY"),
    (r"deepseek-(?:chat|reasoner)", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
]


@dataclass
class Facts:
    text: str
    model_path: str | None = None
    total_gpus: int | None = None
    mode_gpus: dict[str, int] = field(default_factory=dict)  # mode -> GPUs (per server for agent_roll_adv)
    batch_size: int | None = None
    grpo_n: int | None = None
    lr: float | None = None
    save_freq: int | None = None
    no_chinese: bool = False
    random_names: bool = False
    win: float | None = None
    loss: float | None = None
    static_models: list[tuple[int, StaticModel]] = field(default_factory=list)  # (position in text, model)


def _int(pattern: str, text: str) -> int | None:
    found = re.search(pattern, text, re.IGNORECASE)
    return int(found.group(1)) if found else None


def model_path(text: str) -> str | None:
    for pattern in (r"`(/[^`\s]+)`", r"(?<![\w.])(/(?:[\w.-]+/)+[\w.-]+)", r"`([\w-]+/[\w.-]+)`",
                    r"\b([\w-]+/[\w.-]*?\d+(?:\.\d+)?[bB][\w.-]*)"):
        found = re.search(pattern, text)
        if found and not found.group(1).lower().endswith((".md", ".py", ".json", ".yaml")):
            return found.group(1)
    return None


def static_models(text: str) -> list[tuple[int, StaticModel]]:
    found: dict[str, tuple[int, StaticModel]] = {}
    keys = re.findall(r"\b([A-Z][A-Z0-9_]*_API_KEY)\b", text)
    for pattern, base_url, key_env in KNOWN_STATIC:
        for match in re.finditer(rf"(?<![A-Za-z0-9_/.-])({pattern})(?![A-Za-z0-9_/-])", text, re.IGNORECASE):
            name = match.group(1)
            if name.lower() not in found:
                env = key_env if key_env in keys or not keys else keys[0]
                found[name.lower()] = (match.start(), StaticModel(name=name, base_url=base_url, api_key_env=env))
    return sorted(found.values(), key=lambda item: item[0])


def gpu_facts(text: str) -> tuple[int | None, dict[str, int]]:
    total, per_mode = None, {}
    for line in text.splitlines():
        count = _int(_GPU, line)
        if count is None:
            continue
        lower = line.lower()
        if "agent_roll_adv" in lower:
            per_server = re.search(r"分别|各|each|per server", lower)
            per_mode["agent_roll_adv"] = count if per_server else max(count // 2, 1)
        elif "agent_roll" in lower:
            per_mode["agent_roll"] = count
        elif total is None and not any(word in lower for word in _MODE_WORDS):
            total = count
    return total, per_mode


def extract(text: str) -> Facts:
    facts = Facts(text=text, model_path=model_path(text))
    facts.total_gpus, facts.mode_gpus = gpu_facts(text)
    facts.batch_size = _int(r"(?:batch[\s_-]*size|batchsize|\bbatch|批大小|批次大小)\s*(?:of|is|=|:|：)?\s*(\d+)", text)
    facts.grpo_n = _int(r"(?:grpo[\s_-]*n|num[\s_-]*repeat|group[\s_-]*size|rollouts?\s+per\s+task|每个任务\s*)"
                        r"\s*(?:of|is|=|:|：)?\s*(\d+)", text)
    facts.save_freq = _int(r"(?:save[\s_-]*freq\w*|checkpoint every)\s*(?:=|:|：)?\s*(\d+)", text)
    lr = re.search(r"(?:\blr\b|learning[\s_-]*rate|学习率)\s*(?:of|is|=|:|：)?\s*(\d+(?:\.\d+)?(?:e-?\d+)?)", text,
                   re.IGNORECASE)
    facts.lr = float(lr.group(1)) if lr else None
    facts.no_chinese = bool(re.search(r"不得出现中文|不要(?:出现)?中文|不能(?:出现|有)中文|no chinese|english only|"
                                      r"only english|without chinese", text, re.IGNORECASE))
    facts.random_names = bool(re.search(r"随机(?:分配|生成)|random\w*\s+(?:\w+\s+){0,3}(?:ids?|names)", text,
                                        re.IGNORECASE))
    win = re.search(r"(?:胜者|获胜者|赢家|winners?|winning (?:side|team))\D{0,20}?(\d+(?:\.\d+)?)", text, re.IGNORECASE)
    loss = re.search(r"(?:败者|失败者|输家|losers?|losing (?:side|team))\D{0,20}?(-?\d+(?:\.\d+)?)", text,
                     re.IGNORECASE)
    facts.win = float(win.group(1)) if win else None
    facts.loss = float(loss.group(1)) if loss else None
    facts.static_models = static_models(text)
    return facts
