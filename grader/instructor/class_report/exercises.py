"""Per exercise: who handed it in, tried it and passed it, its score distribution and its item
statistics (``items``), against each learner's course total."""
from __future__ import annotations

from dataclasses import asdict

from .items import item_statistics
from .records import ClassRecords


def course_totals(records: ClassRecords) -> dict[str, float]:
    """learner -> points over every notebook they handed in."""
    totals: dict[str, float] = {}
    for submission in records.submissions:
        totals[submission.learner] = totals.get(submission.learner, 0.0) + submission.score
    return totals


def exercise_table(records: ClassRecords) -> list[dict]:
    """One row per exercise, in course order."""
    totals = course_totals(records)
    rows = []
    for assignment, layout in sorted(records.layouts.items()):
        for name in layout.exercises:
            answers = [a for s in records.submissions if s.assignment == assignment
                       for a in s.answers if a.exercise == name]
            max_score = sum(p for _, p in layout.tests[name])
            scores = {a.learner: a.score for a in answers}
            statistics = item_statistics(scores, totals, max_score)
            rows.append({
                "assignment": assignment, "exercise": name,
                "exercise_id": next((a.exercise_id for a in answers), f"nb{assignment}.{name}"),
                "max_score": max_score,
                "submitted": len(answers),
                "attempted": sum(a.attempted for a in answers),
                "passed": sum(a.passed for a in answers),
                **{k: round(v, 3) if isinstance(v, float) else v for k, v in asdict(statistics).items()},
                "scores": sorted(scores.values()),
            })
    return rows
