"""Asks no vibe-rl project can hold, refused before a family is planned (a clear error beats a project that
silently trains something else):

- images, video or audio as input (vision-language models such as Qwen2.5-VL, "multimodal", "图像"): the
  engine serves causal language models and the games exchange text;
- a value model (actor-critic, PPO with GAE, "value head", "价值模型") and PPO named as the algorithm: training
  is GRPO, whose baseline is the group's mean reward (a bare "critic" is not refused: in a workflow it is an
  agent that reviews another's answer);
- preference optimisation (DPO, KTO, ORPO, SimPO): training learns from episode rewards, not preference pairs.

A mention that declines the ask is not one ("GRPO, not PPO", "no critic", "critic-free", "不用 PPO"), and
neither is a PPO term that GRPO shares ("PPO-style clipping", "ppo_mini_batch_size"). Each error says what
was asked, why the plan cannot hold it, and what to write instead.
"""

from __future__ import annotations

import re

from vibe_rl.errors import PlannerError

_DECLINED = (r"(?:\bno\b|\bnot\b|\bwithout\b|\binstead\s+of\b|\brather\s+than\b|\bunlike\b|\bvs\.?|\bversus\b|"
             r"\bthan\b|\bdon'?t\s+(?:use|need|want)\b|\bnor\b|不用|不要|无需|不需要|没有|而不是|而非|不是)[\s\w(),-]{0,12}$")
ASKS = [
    ("vision",
     r"\bmulti[\s-]*modal\b|\bvision[\s-]*language\b|\bVLMs?\b|[\w.]-VL\b|-VL-|\bllava\b|\binternvl\b|"
     r"\b(?:images?|pictures?|photos?|screenshots?|videos?|audio)\b|多模态|图像|图片|视觉|视频|音频|看图",
     "images, video or audio as input ({said!r}): vibe-rl serves causal language models and its games exchange "
     "text only. Describe the game in text (e.g. the picture's word as a text clue) and name a text model, then "
     "plan again."),
    ("critic",
     r"\bactor[\s-]*critic\b|\b(?:a|the|ppo|rl)\s+critic\s+(?:and|or|/)\s+value\b|\bvalue[\s-]*(?:model|head|network|function|net)\b|\bGAE\b|价值模型|价值网络|价值函数|"
     r"评论家模型|(?<![\w-])PPO\b(?![\s_-]*(?:mini|micro|clip|epochs?|style|loss|objective|ratio|[\s_-]*like))",
     "a critic / PPO ({said!r}): vibe-rl trains with GRPO, whose baseline is the mean reward of a group of "
     "episodes on the same task, and has no value model. Drop the critic (say GRPO, with the group size you "
     "want, e.g. '8 rollouts per prompt'), then plan again."),
    ("preference",
     r"(?<![\w-])(?:DPO|KTO|ORPO|SimPO)\b",
     "preference optimisation ({said!r}): vibe-rl trains with GRPO from episode rewards (win / loss), not from "
     "preference pairs. Say how an episode is rewarded instead, then plan again."),
]


def check_supported(text: str) -> tuple[str, list[str]]:
    """PlannerError for the first ask of ASKS the spec makes (and does not decline); else (the text, no notes)."""
    for _, pattern, why in ASKS:
        for m in re.finditer(pattern, text, re.IGNORECASE):
            line_start = text.rfind("\n", 0, m.start()) + 1
            if re.search(_DECLINED, text[line_start:m.start()], re.IGNORECASE):
                continue
            start = max(text.rfind(c, 0, m.start()) for c in "\n,，.。;；:：") + 1
            ends = [i for i in (text.find(c, m.end()) for c in "\n,，。;；") if i >= 0]
            said = text[start:min(ends or [len(text)])].strip()
            raise PlannerError(f"The spec asks for {why.format(said=said[:100])}")
    return text, []
