"""The planner corpus (tests/planner/corpus/*.yaml): specs in Chinese and English with the field values the
offline planner must produce. Every expected field is checked; a case lists what it expects, including
`unparsed` (what the planner must report instead of guessing) and notes about the defaults it took."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from vibe_rl.errors import PlannerError
from vibe_rl.planner.offline import OfflinePlanner

REPO = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).parent / "corpus"
CASES = [case for path in sorted(CORPUS.glob("*.yaml")) for case in yaml.safe_load(path.read_text(encoding="utf-8"))]


def text_of(case: dict) -> str:
    return (REPO / case["seed"]).read_text(encoding="utf-8") if "seed" in case else case["spec"]


def test_corpus_size_and_languages():
    written = [c for c in CASES if "seed" not in c]
    chinese = [c for c in written if any("\u4e00" <= ch <= "\u9fff" for ch in c["spec"])]
    seeds = {c["seed"] for c in CASES if "seed" in c}
    assert len(written) >= 40 and len(chinese) >= 0.45 * len(written)
    assert seeds == {p.relative_to(REPO).as_posix() for p in REPO.glob("templates/*/examples/seed_prompt.*.md")}
    assert len({c["id"] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_corpus_case(case):
    if "error" in case:
        with pytest.raises(PlannerError) as info:
            OfflinePlanner().plan(text_of(case), family=case.get("family"))
        for part in case["error"]:
            assert part in str(info.value)
        return
    spec = OfflinePlanner().plan(text_of(case), family=case.get("family"))
    wrong = {}
    for key, want in case["expect"].items():
        if key in ("unparsed_has", "notes_has"):
            entries = spec.unparsed if key == "unparsed_has" else spec.notes
            missing = [w for w in want if not any(w in entry for entry in entries)]
            if missing:
                wrong[key] = (missing, entries)
        elif spec.get(key) != want:
            wrong[key] = (want, spec.get(key))
    assert not wrong, f"{case['id']}: expected vs got {wrong}\nunparsed: {spec.unparsed}\nnotes: {spec.notes}"
