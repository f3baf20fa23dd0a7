"""Models that play a side or judge rather than train: provider models the planner knows (each with its base
URL and API key env var), and any model name the words around it give to a side.

A model name plays a side (a static model) when the nearest context word before it in its comma part says so
("played by", "opponent", "由 ... 扮演"), else the first one after it ("glm-4-plus 扮演卧底"), else when it is
assigned to a role ("undercover = claude-3-5-sonnet", "卧底：glm-4-plus") and no local path or training word
follows it in its part or its aside ("civilians = Qwen3-8B (/ckpt/qwen3-8b)" trains), else when an API key
env var stands in its part ("glm-4-plus via ZHIPU_API_KEY"). A name said to judge in every mention ("a judge
gpt-4o", "评委模型 gpt-4o") is a judge, not a player.
"""

from __future__ import annotations

import re

from vibe_rl.planner.text import MODEL_NAME, SpecText, part_around
from vibe_rl.schema.job import StaticModel

# Static models people name in specs: pattern -> (base_url, api_key_env).
KNOWN_STATIC = [
    (r"qwen[\w.-]*-(?:max|plus|turbo)[\w.-]*|qwen3-235b-a22b[\w.-]*",
     "https://dashscope.aliyuncs.com/compatible-mode/v1", "DASHSCOPE_API_KEY"),
    (r"gpt-4o(?:-mini)?|gpt-4\.1(?:-mini)?|gpt-5(?:-mini)?|o3-mini", "https://api.openai.com/v1", "OPENAI_API_KEY"),
    (r"deepseek-(?:chat|reasoner)", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
    (r"glm-4(?:-(?:plus|air\w*|flash\w*|long)|(?![A-Za-z0-9-]|\.\d))|glm-4\.[5-9](?:-(?:air|flash)\w*)?|glm-z1[\w-]*",
     "https://open.bigmodel.cn/api/paas/v4", "ZHIPU_API_KEY"),
    (r"moonshot-v1-\w+|kimi-k2[\w.-]*", "https://api.moonshot.cn/v1", "MOONSHOT_API_KEY"),
    (r"gemini-[\d.]+-(?:pro|flash)[\w.-]*", "https://generativelanguage.googleapis.com/v1beta/openai/",
     "GEMINI_API_KEY"),
    # Anthropic's OpenAI-compatible endpoint (the swarm calls static models with the OpenAI SDK)
    (r"claude-[\w.-]*[a-z\d]", "https://api.anthropic.com/v1/", "ANTHROPIC_API_KEY"),
]
# Words around a model name the planner has no provider for: it plays a side (a static model) or it trains.
_CONTEXT = (r"(?P<static>played\s+by|\bplays?\b|controlled\s+by|driven\s+by|powered\s+by|\bopponents?\b|\bagainst\b|"
            r"\bvs\.?(?!\w)|\bversus\b|\bstatic\b|\bfrozen\b|\bfixed\b|\bothers\b|\bthe\s+rest\b|由|扮演|对手|对抗|"
            r"静态|冻结|固定|其余|其他|驱动|控制)|(?P<train>\btrain\w*|fine[\s-]*tun\w*|base\s+model|\bpolicy\b|"
            r"\blearners?\b|\binit\w*|start(?:s|ing)?\s+from|训练|微调|基座|初始化|学习)")
JUDGE_WORDS = r"\bjudg\w*|\bgrader\b|\breferee\b|\bevaluator\b|\barbiter\b|\bscorer\b|裁判|评委|评判|评审|打分|评分"
# "<role> = <model>", "<role>: <model>", "<role> -> <model>": a model assigned to a role (not to the model itself)
_ASSIGNED = (r"(?<![\w-])(?!(?:the\s+)?(?:base\s+)?(?:models?|checkpoints?|ckpt|weights|path|policy|actor|模型|基座|权重)"
             r"\s*(?:=|:|：|->|→|=>)\s*$)[^\W\d_][\w\s]{0,30}?\s*(?:=|:|：|->|→|=>)\s*$")
_TRAINS_AFTER = r"(?<![\w.])\.{0,2}/[\w.-]+/|\btrain\w*|fine[\s-]*tun\w*|\blearners?\b|训练|微调|可训练"


def static_models(src: SpecText) -> list[tuple[int, StaticModel]]:
    found: dict[str, tuple[int, StaticModel]] = {}
    keys = re.findall(r"\b([A-Z][A-Z0-9_]*_API_KEY)\b", src.text)
    for pattern, base_url, key_env in KNOWN_STATIC:
        for match in src.finditer(rf"(?<![A-Za-z0-9_/.-])({pattern})(?![A-Za-z0-9_/-])"):
            name, env = match.group(1).rstrip("."), key_env if key_env in keys or not keys else keys[0]
            found.setdefault(name.lower(), (match.start(), StaticModel(name=name, base_url=base_url,
                                                                       api_key_env=env)))
    for start, end in src.clauses():  # "played by Llama-3-70B served at http://10.0.0.5:8000/v1"
        url = re.search(r"https?://[^\s`'\"，。；）)]+", src.text[start:end])
        names = [m for m in re.finditer(MODEL_NAME, src.text[start:end], re.IGNORECASE)
                 if not (url and url.start() <= m.start() < url.end())]
        if url and names:
            name = names[0].group().rstrip(".")
            _, model = found.setdefault(name.lower(), (start + names[0].start(), StaticModel(name=name)))
            model.base_url, model.api_key_env = url.group().rstrip("."), (keys or [model.api_key_env])[0]
    for m in src.finditer(MODEL_NAME):  # "spies played by llama-3-70b", "opponent: mistral-large"
        name = m.group().rstrip(".")
        key = key_next_to(src, m.start() + len(name))
        if (name.lower() not in found and (re.search(r"[\d-]", name) or key)  # "the DeepSeek API" names no model
                and _static_context(src, m.start(), m.start() + len(name))):
            # "llama-3-70b (TOGETHER_API_KEY)": the key, and the URL from the provider's *_BASE_URL
            url_env = key.removesuffix("_API_KEY") + "_BASE_URL" if key else None
            found[name.lower()] = (m.start(), StaticModel(name=name, api_key_env=key, base_url_env=url_env))
    return sorted(found.values(), key=lambda item: item[0])


def key_next_to(src: SpecText, end: int) -> str | None:
    """The API key env var named right after a model name in its comma part or its aside ("llama-3-70b
    (TOGETHER_API_KEY)", "mixtral via $GROQ_API_KEY", "qwen2-72b，密钥 SILICONFLOW_API_KEY")."""
    key = re.search(r"\$?\{?\b([A-Z][A-Z0-9_]*_API_KEY)\b", src.text[end:_part_end(src, end, ",，;；")])
    return key.group(1) if key else None


def _static_context(src: SpecText, start: int, end: int) -> bool:
    """Whether the words around a model name say it plays a side rather than trains (the module's rules)."""
    left = max(src.clause_of(start)[0], part_around(src.text, start, end, ",，;；、(（)）")[0])
    right = _part_end(src, end, ",，;；、(（)）")
    before = list(re.finditer(_CONTEXT, src.text[left:start], re.I))
    word = before[-1] if before else re.search(_CONTEXT, src.text[end:right], re.IGNORECASE)
    if word:
        return bool(word.group("static"))
    if re.search(_ASSIGNED, src.text[left:start], re.IGNORECASE):
        return not re.search(_TRAINS_AFTER, src.text[end:_part_end(src, end, ",，;；")], re.IGNORECASE)
    return bool(re.search(r"\b[A-Z][A-Z0-9_]*_API_KEY\b", src.text[left:right]) or key_next_to(src, end))


def _part_end(src: SpecText, end: int, separators: str) -> int:
    """Where the part from `end` ends: the first of the `separators` at or after it, else its clause's end."""
    clause_end = src.clause_of(end)[1] if end < len(src.text) else end
    return min(part_around(src.text, end, end, separators)[1], clause_end)


def mentions(text: str, name: str) -> list[re.Match]:
    """Every mention of a model name (a CJK neighbour is a boundary: "使用qwen-max"); at least the first one."""
    found = list(re.finditer(rf"(?<![A-Za-z0-9_.-]){re.escape(name)}(?![A-Za-z0-9_-])", text, re.IGNORECASE))
    return found or [re.search(re.escape(name), text, re.IGNORECASE)]


def judge_context(text: str, start: int, end: int) -> bool:
    """Whether a model name is said to judge rather than play: a judge word just before it in its sentence ("a
    judge model (deepseek-chat)", "裁判由 qwen-max 担任") or just after it ("gpt-4o as the judge", "qwen-max 做裁判")."""
    before = text[max(part_around(text, start, start, "\n;；。")[0], start - 30):start]
    return bool(re.search(rf"(?:{JUDGE_WORDS})[^,，;；]{{0,16}}$", before, re.IGNORECASE)
                or re.match(rf"\s*[)）]?\s*(?:as|is|acts as|serves as|will be|作为|当|做|担任|来当|来做)?\s*(?:the\s+|a\s+|an\s+)?"
                            rf"(?:{JUDGE_WORDS})", text[end:end + 30], re.IGNORECASE))


