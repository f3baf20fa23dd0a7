"""The workflow's graders: the offline rules, and the LLM-judge path against a scripted local
OpenAI-compatible server (no network). Run: python -m pytest test_workflow.py"""

import json
import random
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import workflow as wf

HERE = Path(__file__).resolve().parent
DATA = json.loads((HERE / "mock_paragraphs.json").read_text(encoding="utf-8"))
RULES, TASKS = DATA["rules"], DATA["paragraphs"]
PRONOUN, SUBJECT = RULES["forbidden_pronouns"][0], RULES["preferred_subjects"][0]
GW = TASKS[0]  # has two abbreviations, two terms and starts with a preferred subject


def test_paragraph_ids_are_unique_and_references_are_clean():
    ids = [t["paragraph_id"] for t in TASKS]
    assert len(ids) == len(set(ids)) >= 10 and all(i.strip() for i in ids)
    for task in TASKS:
        assert task["source"].isascii()
        assert wf.find_errors(task["reference"], task, RULES) == []
        assert any(s in task["reference"] for s in RULES["preferred_subjects"]) or "We" not in task["source"]


# ---- translation quality ----

@pytest.mark.parametrize("task", TASKS, ids=lambda t: t["paragraph_id"])
def test_reference_translation_scores_full_marks(task):
    grade = wf.TranslationQualityGrader(RULES).grade(task["reference"], task)
    assert grade.score == 2.0 and grade.reward == 1.0


def test_first_person_pronoun_is_penalised():
    grader = wf.TranslationQualityGrader(RULES)
    bad = GW["reference"].replace(SUBJECT, PRONOUN)
    assert bad != GW["reference"]
    grade = grader.grade(bad, GW)
    assert PRONOUN in grade.details["errors"]
    assert 1.0 <= grade.score < 1.6


def test_dropped_abbreviation_and_wrong_term_are_penalised():
    grader = wf.TranslationQualityGrader(RULES)
    no_abbr = GW["reference"].replace("GWs", "")
    wrong_term = GW["reference"].replace(GW["terms"][0]["zh"], "XX")
    full = grader.grade(GW["reference"], GW).score
    assert grader.grade(no_abbr, GW).score < full
    assert grader.grade(wrong_term, GW).score < full
    assert "GWs" in grader.grade(no_abbr, GW).details["errors"]
    both = no_abbr.replace(GW["terms"][0]["zh"], "XX")
    assert grader.grade(both, GW).score < min(grader.grade(no_abbr, GW).score, grader.grade(wrong_term, GW).score)


def test_empty_untranslated_and_overlong_outputs_score_low():
    grader = wf.TranslationQualityGrader(RULES)
    assert grader.grade("", GW).score == 0.0
    assert grader.grade("   \n", GW).score == 0.0
    assert grader.grade(GW["source"], GW).score < 0.5  # left in English
    long = grader.grade(GW["reference"] * 3, GW)
    assert long.details["length_ratio"] > 2.0 and long.score <= 1.5


def test_scores_stay_in_range_for_garbage():
    grader = wf.TranslationQualityGrader(RULES)
    rng = random.Random(0)
    alphabet = GW["reference"] + "abcdefgh {}[]\"'\n0123456789"
    for _ in range(200):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 200)))
        grade = grader.grade(text, rng.choice(TASKS))
        assert 0.0 <= grade.score <= 2.0 and 0.0 <= grade.reward <= 1.0


# ---- proper-noun detection ----

def _damaged_draft():
    draft = GW["reference"].replace(SUBJECT, PRONOUN).replace("GWs", "").replace(GW["terms"][0]["zh"], "XX")
    truth = wf.find_errors(draft, GW, RULES)
    assert {e.kind for e in truth} == {"pronoun", "abbreviation", "term"}
    return draft, truth


def _perfect_review(truth):
    return json.dumps({"errors": [{"term": e.term, "wrong": e.term, "suggestion": e.expected[0]} for e in truth]},
                      ensure_ascii=False)


def test_complete_and_correct_detection_scores_full_marks():
    draft, truth = _damaged_draft()
    grade = wf.ProperNounDetectionGrader(RULES).grade(_perfect_review(truth), draft, GW)
    assert grade.score == 2.0 and grade.details["false_positives"] == 0


def test_invalid_json_scores_zero():
    draft, _ = _damaged_draft()
    grader = wf.ProperNounDetectionGrader(RULES)
    for answer in ("", "the translation looks fine", '{"errors": [', '{"errors": "none"}', "[1, 2]"):
        assert grader.grade(answer, draft, GW).score == 0.0, answer


def test_json_in_code_fences_and_bare_lists_are_accepted():
    draft, truth = _damaged_draft()
    review = json.loads(_perfect_review(truth))["errors"]
    grader = wf.ProperNounDetectionGrader(RULES)
    fenced = "Here you go:\n```json\n" + json.dumps(review, ensure_ascii=False) + "\n```"
    assert grader.grade(fenced, draft, GW).score == 2.0


def test_missed_errors_and_missing_suggestions_cost_completeness():
    draft, truth = _damaged_draft()
    grader = wf.ProperNounDetectionGrader(RULES)
    assert grader.grade('{"errors": []}', draft, GW).score == 0.5
    one = json.dumps({"errors": [{"term": truth[0].term, "suggestion": truth[0].expected[0]}]}, ensure_ascii=False)
    no_fix = json.dumps({"errors": [{"term": e.term} for e in truth]}, ensure_ascii=False)
    partial, unfixed = grader.grade(one, draft, GW).score, grader.grade(no_fix, draft, GW).score
    assert 0.5 < partial < 2.0 and 0.5 < unfixed < 2.0
    assert grader.grade(one, draft, GW).details["recall"] == pytest.approx(1 / 3, abs=1e-3)


def test_english_pronoun_names_match_exactly():
    draft, truth = _damaged_draft()
    grader = wf.ProperNounDetectionGrader(RULES)
    review = json.dumps({"errors": [{"term": "we", "suggestion": SUBJECT}]}, ensure_ascii=False)
    assert grader.grade(review, draft, GW).details["false_positives"] == 0
    review = json.dumps({"errors": [{"term": "between", "suggestion": SUBJECT}]}, ensure_ascii=False)
    assert grader.grade(review, draft, GW).details["false_positives"] == 1


def test_false_positives_lower_the_score():
    draft, truth = _damaged_draft()
    grader = wf.ProperNounDetectionGrader(RULES)
    noisy = json.loads(_perfect_review(truth))
    noisy["errors"] += [{"term": GW["terms"][1]["en"], "suggestion": "YY"}, {"term": "LIGO", "suggestion": "ZZ"}]
    grade = grader.grade(json.dumps(noisy, ensure_ascii=False), draft, GW)
    assert grade.details["false_positives"] == 2 and 1.5 < grade.score < 2.0


def test_clean_draft_rewards_an_empty_list_and_penalises_inventions():
    grader = wf.ProperNounDetectionGrader(RULES)
    assert grader.grade('{"errors": []}', GW["reference"], GW).score == 2.0
    invented = json.dumps({"errors": [{"term": "LIGO", "suggestion": "something"}]})
    assert grader.grade(invented, GW["reference"], GW).score == 0.5


# ---- prompts ----

def test_prompts_carry_the_inputs_and_grow_as_one_conversation():
    rough = wf.rough_messages(GW["source"])
    detector = wf.detector_messages(GW["source"], "DRAFT")
    final = wf.final_messages(GW["source"], "DRAFT", '{"errors": []}')
    assert GW["source"] in rough[-1]["content"]
    assert detector[:len(rough)] == rough and detector[len(rough)] == {"role": "assistant", "content": "DRAFT"}
    assert final[:len(detector)] == detector
    assert final[len(detector)] == {"role": "assistant", "content": '{"errors": []}'}


# ---- LLM judge ----

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def scripted_judge():
    """A local OpenAI-compatible server whose answers the test scripts (no network)."""
    answers: list[str] = []
    requests: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            requests.append(body)
            content = answers.pop(0) if answers else "no idea"
            reply = {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                     "choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": content}}],
                     "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", answers, requests
    server.shutdown()
    server.server_close()


def test_judge_scores_when_configured_and_falls_back_on_nonsense(scripted_judge, monkeypatch):
    url, answers, requests = scripted_judge
    monkeypatch.setenv("JUDGE_MODEL", "judge-model")
    monkeypatch.setenv("JUDGE_BASE_URL", url)
    monkeypatch.setenv("JUDGE_API_KEY", "k")
    judge = wf.LLMJudge.from_env()
    grader = wf.TranslationQualityGrader(RULES, judge)
    answers += ['{"score": 1, "reason": "ok"}', "I refuse", '{"score": 7}']
    assert grader.grade(GW["reference"], GW).score == 1.0  # the judge's word, not the rules'
    assert requests[0]["model"] == "judge-model" and requests[0]["user"] == "judge:grader"
    assert grader.grade(GW["reference"], GW).score == 2.0  # unreadable answer: rule fallback
    assert grader.grade(GW["reference"], GW).score == 2.0  # out of range: rule fallback
    assert grader.judge_failures == 2
    detector = wf.ProperNounDetectionGrader(RULES, judge)
    answers.append('```json\n{"score": 2}\n```')
    assert detector.grade("not json", GW["reference"], GW).score == 2.0


def test_unreachable_judge_falls_back_to_rules():
    judge = wf.LLMJudge("judge-model", f"http://127.0.0.1:{_free_port()}/v1", "k")
    grader = wf.ProperNounDetectionGrader(RULES, judge)
    assert grader.grade('{"errors": []}', GW["reference"], GW).score == 2.0
    assert grader.judge_failures == 1


def test_no_judge_without_env(monkeypatch):
    monkeypatch.delenv("JUDGE_MODEL", raising=False)
    monkeypatch.delenv("JUDGE_BASE_URL", raising=False)
    assert wf.LLMJudge.from_env() is None
