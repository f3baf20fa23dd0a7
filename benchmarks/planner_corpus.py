"""The planner corpus as a score: every case of tests/planner/corpus/*.yaml planned with the offline planner,
checked as tests/planner/test_corpus.py checks it. Prints one JSON object: cases, passed, failed (their ids).

    .venv/bin/python benchmarks/planner_corpus.py [--show]   (--show also prints each failure's differences)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

from vibe_rl.errors import PlannerError
from vibe_rl.planner.offline import OfflinePlanner

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "planner" / "corpus"


def differences(case: dict) -> dict[str, Any]:
    """What the offline plan of one case gets wrong ({} when it is right)."""
    text = (REPO / case["seed"]).read_text(encoding="utf-8") if "seed" in case else case["spec"]
    try:
        spec = OfflinePlanner().plan(text, family=case.get("family"))
    except PlannerError as exc:
        if "error" in case and all(part in str(exc) for part in case["error"]):
            return {}
        return {"error": str(exc)[:300]}
    if "error" in case:
        return {"error": "planned, expected a refusal"}
    wrong: dict[str, Any] = {}
    for key, want in case["expect"].items():
        if key in ("unparsed_has", "notes_has"):
            entries = spec.unparsed if key == "unparsed_has" else spec.notes
            missing = [w for w in want if not any(w in entry for entry in entries)]
            if missing:
                wrong[key] = missing
        else:
            try:
                got = spec.get(key)
            except (KeyError, IndexError) as exc:
                got = f"missing ({exc})"
            if got != want:
                wrong[key] = {"want": want, "got": got}
    return wrong


def main() -> None:
    cases = [c for path in sorted(CORPUS.glob("*.yaml")) for c in yaml.safe_load(path.read_text(encoding="utf-8"))]
    failed = {}
    for case in cases:
        wrong = differences(case)
        if wrong:
            failed[case["id"]] = wrong
    if "--show" in sys.argv:
        for case_id, wrong in failed.items():
            print(case_id, json.dumps(wrong, ensure_ascii=False, default=str), file=sys.stderr)
    print(json.dumps({"cases": len(cases), "passed": len(cases) - len(failed), "failed": sorted(failed)}))


if __name__ == "__main__":
    main()
