"""Academic translation workflow: the three agents' prompts and the two graders (pure; no server needed).

Agent 1 (server 1) writes a rough translation, agent 2 (server 2) lists its proper-noun errors as JSON,
agent 3 (server 1) writes the final translation. The three share one growing conversation (one system
prompt, the paragraph, then each agent's answer and the next agent's job), so every later prompt starts
with the earlier one and the server reuses its tokens. Each server gets its own reward:
- TranslationQualityGrader (server 1) scores the final translation 0-2.
- ProperNounDetectionGrader (server 2) scores agent 2's JSON against the errors the rough translation
  really has, 0-2.
Both normalise to [0, 1] (reward = score / 2). With an LLM judge configured (JUDGE_MODEL, JUDGE_BASE_URL,
JUDGE_API_KEY) the judge scores; the rule-based grader below is the offline fallback, also used whenever
the judge fails or answers something unreadable (counted in `judge_failures`).

Rule-based translation score = fidelity * (1 + conventions) - length penalty, clamped to [0, 2]:
  fidelity    = min(1, character-bigram F1 against the reference / 0.5)
  conventions = 1 - 0.5 if a forbidden first-person pronoun appears - 0.25 per missing abbreviation
                  - 0.25 per domain term without its expected rendering (floored at 0)
  length      = 0.5 when the output is shorter than half or longer than twice the reference
Rule-based detection score (0 for output that is not JSON with an error list):
  0.5 for valid JSON + recall (a found error counts 1 with the right suggestion, 0.5 without)
  + 0.5 * precision (awarded only when something was found, or there was nothing to find)
Language-specific data (forbidden pronouns, preferred subjects, term renderings) comes from the dataset.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

SYSTEM = (
    "Three agents translate an English academic paragraph into Simplified Chinese: a translator writes a "
    "draft, a reviewer lists the draft's errors, and a final translator applies the corrections. A "
    "translation uses an impersonal academic register: it renders 'we' and 'our' as 'this study' or 'this "
    "paper', never as a first-person pronoun, and keeps established abbreviations (for example GWs, CNN) in "
    "Latin letters. Each message below says which agent you are now."
)
ROUGH_TASK = "You are the translator. Translate the paragraph above. Output only the translation."
DETECTOR_TASK = (
    "You are the reviewer. Find proper-noun and terminology errors in the translation above: first-person "
    "pronouns that should be impersonal subjects, abbreviations that were dropped or expanded, and domain "
    "terms translated wrongly. Answer with JSON only, in the form "
    '{"errors": [{"term": "<English term or wrong text>", "wrong": "<text in the translation>", '
    '"suggestion": "<corrected Chinese>"}]}. Use {"errors": []} when there is nothing to fix.'
)
FINAL_TASK = ("You are the final translator. Apply the reviewer's corrections to the draft and output only "
              "the final translation.")


def rough_messages(source: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"English:\n{source}\n\n{ROUGH_TASK}"}]


def detector_messages(source: str, draft: str) -> list[dict[str, str]]:
    """The translator's conversation, its draft, then the reviewer's job."""
    return [*rough_messages(source), {"role": "assistant", "content": draft},
            {"role": "user", "content": DETECTOR_TASK}]


def final_messages(source: str, draft: str, review: str) -> list[dict[str, str]]:
    """The reviewer's conversation, its JSON, then the final translator's job."""
    return [*detector_messages(source, draft), {"role": "assistant", "content": review},
            {"role": "user", "content": FINAL_TASK}]


@dataclass
class Grade:
    score: float  # 0-2
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def reward(self) -> float:
        return self.score / 2.0


@dataclass
class Error:
    kind: str  # "pronoun" | "abbreviation" | "term"
    term: str  # what the error is about
    expected: list[str]  # acceptable corrections
    aliases: list[str] = field(default_factory=list)  # other names a reviewer may use, matched exactly


def _norm(text: str) -> str:
    """Lowercase, without whitespace or punctuation (works for CJK and Latin text alike)."""
    return "".join(c for c in text.lower() if not c.isspace() and not unicodedata.category(c).startswith("P"))


def bigram_f1(candidate: str, reference: str) -> float:
    """F1 of character-bigram multisets; 0 when either side is empty."""
    a, b = _norm(candidate), _norm(reference)
    grams_a = [a[i:i + 2] for i in range(len(a) - 1)]
    grams_b = [b[i:i + 2] for i in range(len(b) - 1)]
    if not grams_a or not grams_b:
        return 0.0
    hits = sum((Counter(grams_a) & Counter(grams_b)).values())
    if hits == 0:
        return 0.0
    precision, recall = hits / len(grams_a), hits / len(grams_b)
    return 2 * precision * recall / (precision + recall)


def find_errors(translation: str, task: dict[str, Any], rules: dict[str, Any]) -> list[Error]:
    """The errors a translation really has, judged from the task's data."""
    text = _norm(translation)
    errors = [Error("pronoun", p, list(rules.get("preferred_subjects", [])), list(rules.get("pronoun_aliases", [])))
              for p in rules.get("forbidden_pronouns", []) if _norm(p) in text]
    errors += [Error("abbreviation", a, [a]) for a in task.get("abbreviations", []) if _norm(a) not in text]
    errors += [Error("term", t["en"], [t["zh"]]) for t in task.get("terms", []) if _norm(t["zh"]) not in text]
    return errors


def parse_json_block(text: str) -> Any:
    """The first JSON value in a model answer (code fences and chatter around it are tolerated)."""
    text = re.sub(r"```(?:json)?", "", text or "")
    decoder = json.JSONDecoder()
    for i, char in enumerate(text):
        if char in "[{":
            try:
                return decoder.raw_decode(text[i:])[0]
            except json.JSONDecodeError:
                continue
    raise ValueError("no JSON value found")


def parse_detections(text: str) -> list[dict[str, str]] | None:
    """Agent 2's error list, or None when the answer is not JSON of the expected shape."""
    try:
        data = parse_json_block(text)
    except ValueError:
        return None
    items = data.get("errors") if isinstance(data, dict) else data
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        return None
    return [{str(k): str(v) for k, v in item.items()} for item in items]


class LLMJudge:
    """Scores with a configured model through the OpenAI SDK; returns None when it cannot."""

    RUBRIC = ("You grade {what} on a 0-2 scale (2: no issues, 1: minor issues, 0: unusable). "
              'Answer with JSON only: {{"score": <0, 1 or 2>, "reason": "<short>"}}.')

    def __init__(self, model: str, base_url: str, api_key: str):
        import openai

        self.model = model
        self.client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=1, timeout=60)

    @classmethod
    def from_env(cls, prefix: str = "JUDGE") -> LLMJudge | None:
        model, url = os.getenv(f"{prefix}_MODEL"), os.getenv(f"{prefix}_BASE_URL")
        return cls(model, url, os.getenv(f"{prefix}_API_KEY", "none")) if model and url else None

    def score(self, what: str, content: str) -> float | None:
        try:
            reply = self.client.chat.completions.create(
                model=self.model, temperature=0, user="judge:grader",
                messages=[{"role": "system", "content": self.RUBRIC.format(what=what)},
                          {"role": "user", "content": content}])
            value = float(parse_json_block(reply.choices[0].message.content or "")["score"])
        except Exception:  # any judge failure falls back to the rules
            return None
        return value if 0.0 <= value <= 2.0 else None


class TranslationQualityGrader:
    def __init__(self, rules: dict[str, Any], judge: LLMJudge | None = None):
        self.rules, self.judge, self.judge_failures = rules, judge, 0

    def grade(self, translation: str, task: dict[str, Any]) -> Grade:
        if self.judge is not None:
            content = (f"English:\n{task['source']}\n\nReference:\n{task['reference']}\n\n"
                       f"Translation:\n{translation}")
            score = self.judge.score("a Chinese translation of an English academic paragraph", content)
            if score is not None:
                return Grade(score, {"judge": True})
            self.judge_failures += 1
        return self.rule_grade(translation, task)

    def rule_grade(self, translation: str, task: dict[str, Any]) -> Grade:
        if not _norm(translation):
            return Grade(0.0, {"empty": True})
        f1 = bigram_f1(translation, task["reference"])
        errors = find_errors(translation, task, self.rules)
        kinds = [e.kind for e in errors]
        penalty = 0.5 * ("pronoun" in kinds) + 0.25 * (kinds.count("abbreviation") + kinds.count("term"))
        ratio = len(_norm(translation)) / max(1, len(_norm(task["reference"])))
        length_penalty = 0.5 if not 0.5 <= ratio <= 2.0 else 0.0
        fidelity = min(1.0, f1 / 0.5)
        score = fidelity * (1.0 + max(0.0, 1.0 - penalty)) - length_penalty
        details = {"bigram_f1": round(f1, 3), "errors": [e.term for e in errors], "length_ratio": round(ratio, 2)}
        return Grade(min(2.0, max(0.0, score)), details)


class ProperNounDetectionGrader:
    def __init__(self, rules: dict[str, Any], judge: LLMJudge | None = None):
        self.rules, self.judge, self.judge_failures = rules, judge, 0

    def grade(self, detection: str, draft: str, task: dict[str, Any]) -> Grade:
        if self.judge is not None:
            known = [e.__dict__ for e in find_errors(draft, task, self.rules)]
            content = (f"English:\n{task['source']}\n\nTranslation under review:\n{draft}\n\n"
                       f"Known errors:\n{json.dumps(known, ensure_ascii=False)}\n\nReviewer's JSON:\n{detection}")
            score = self.judge.score("a reviewer's JSON list of translation errors (valid JSON, complete, "
                                     "accurate, no false positives)", content)
            if score is not None:
                return Grade(score, {"judge": True})
            self.judge_failures += 1
        return self.rule_grade(detection, draft, task)

    def rule_grade(self, detection: str, draft: str, task: dict[str, Any]) -> Grade:
        flags = parse_detections(detection)
        if flags is None:
            return Grade(0.0, {"valid_json": False})
        truth = find_errors(draft, task, self.rules)
        matched: set[int] = set()
        found = 0.0
        for error in truth:
            hits = [i for i, flag in enumerate(flags) if _mentions(flag, error)]
            if hits:
                matched.update(hits)
                right = any(_norm(x) in _norm(flags[i].get("suggestion", "")) for i in hits for x in error.expected)
                found += 1.0 if right else 0.5
        recall = found / len(truth) if truth else (1.0 if not flags else 0.0)
        precision = len(matched) / len(flags) if flags else 1.0
        precision_part = 0.5 * precision if (found > 0 or not truth) else 0.0
        score = 0.5 + recall + precision_part
        details = {"valid_json": True, "true_errors": len(truth), "flags": len(flags),
                   "false_positives": len(flags) - len(matched), "recall": round(recall, 3)}
        return Grade(min(2.0, score), details)


def _mentions(flag: dict[str, str], error: Error) -> bool:
    """Whether a reviewer's flag is about this error (its term or a correction named in any field)."""
    text = _norm(" ".join(flag.values()))
    needles = [error.term] + (error.expected if error.kind == "term" else [])
    if any(_norm(n) and _norm(n) in text for n in needles):
        return True
    return any(_norm(value) in {_norm(a) for a in error.aliases} for value in flag.values())
