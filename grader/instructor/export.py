"""Scores out of the gradebook into our CSV (``autograde-scores.csv``: not ``grades.csv``, which is
``nbgrader export``'s, in its own format): one row per learner and assignment, one column per
graded cell of the assignments handed in, then the total, the maximum, when it was handed in and
how late, and the late penalty (nbgrader's ``late_submission_penalty``: points the instructor's
late-submission policy takes off the total; 0 for a submission on time or without a penalty method)."""
from __future__ import annotations

import csv
import io
from pathlib import Path

from nbgrader.api import Gradebook

from ..course import Course
from ..files import write_atomically

CSV_NAME = "autograde-scores.csv"     # in the course directory, beside nbgrader export's grades.csv
LATE_COLUMNS = ["timestamp", "seconds_late", "late", "late_penalty"]


def lateness(assignment) -> dict[str, object]:
    """A submitted assignment's hand-in time, seconds late and status, from the gradebook: "late",
    "on time", "no due date" (none set for the assignment) or "no timestamp" (none handed in with it)."""
    timestamp, duedate = assignment.timestamp, assignment.duedate
    if timestamp is None:
        status = "no timestamp"
    elif duedate is None:
        status = "no due date"
    else:
        status = "late" if assignment.total_seconds_late > 0 else "on time"
    return {"timestamp": f"{timestamp:%Y-%m-%d %H:%M:%S} UTC" if timestamp else "",
            "seconds_late": _number(assignment.total_seconds_late) if status in ("late", "on time") else "",
            "late": status}


def score_rows(course: Course) -> tuple[list[str], list[dict[str, object]]]:
    """The CSV's header and rows, from every submission recorded in the gradebook."""
    rows: list[dict[str, object]] = []
    columns: list[str] = []
    with Gradebook(course.db_url) as gradebook:
        for assignment in sorted(gradebook.assignments, key=lambda a: a.name):
            for notebook in sorted(assignment.notebooks, key=lambda n: n.name):
                if notebook.submissions:        # columns only for what was handed in
                    for cell in sorted(notebook.grade_cells, key=lambda c: c.name):
                        if cell.name not in columns:
                            columns.append(cell.name)
                for submission in sorted(notebook.submissions, key=lambda s: s.student.id):
                    row: dict[str, object] = {"learner": submission.student.id, "assignment": assignment.name}
                    for grade in submission.grades:
                        row[grade.name] = _number(grade.score)
                    row["total"], row["max"] = _number(submission.score), _number(submission.max_score)
                    row.update(lateness(submission.assignment))
                    row["late_penalty"] = _number(submission.late_submission_penalty or 0)
                    rows.append(row)
    return ["learner", "assignment", *columns, "total", "max", *LATE_COLUMNS], rows


def _number(value: float | None) -> object:
    if value is None:
        return ""
    return int(value) if float(value).is_integer() else round(float(value), 3)


def write_csv(course: Course, path: Path) -> Path:
    header, rows = score_rows(course)
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=header, restval="")
    writer.writeheader()
    writer.writerows(rows)
    return write_atomically(path, text.getvalue())
