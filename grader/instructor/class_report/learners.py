"""Per learner: points per notebook and for the course, and who needs help first.

Sorted with the learners who need help on top: the lowest share of the points of what they
handed in first, then the most exercises attempted without a pass. A learner is marked as needing
help with less than ``HELP_SHARE`` of the points, or ``HELP_ATTEMPTS`` or more exercises attempted
and not passed."""
from __future__ import annotations

from .records import ClassRecords

HELP_SHARE = 0.5
HELP_ATTEMPTS = 2


def learner_table(records: ClassRecords) -> list[dict]:
    rows = []
    for learner in records.learners:
        mine = [s for s in records.submissions if s.learner == learner]
        answers = [a for s in mine for a in s.answers]
        total, most = sum(s.score for s in mine), sum(s.max_score for s in mine)
        share = total / most if most else 0.0
        struggling = sum(a.attempted and not a.passed for a in answers)
        rows.append({
            "learner": learner,
            "notebooks": {s.assignment: s.score for s in mine},
            "total": total, "max": most, "share": round(share, 3),
            "attempted": sum(a.attempted for a in answers),
            "passed": sum(a.passed for a in answers),
            "attempted_not_passed": struggling,
            "needs_help": share < HELP_SHARE or struggling >= HELP_ATTEMPTS,
        })
    return sorted(rows, key=lambda r: (not r["needs_help"], r["share"], -r["attempted_not_passed"], r["learner"]))
