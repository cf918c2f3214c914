"""``python -m grader report``: read the graded class, compute every table, write them as JSON and
CSV, and render the HTML page and the notebook from the JSON."""
from __future__ import annotations

import csv
import datetime
import json
import os
from dataclasses import asdict
from pathlib import Path

from ...course import REPO, Course
from . import similarity
from .exercises import exercise_table
from .learners import learner_table
from .misconceptions import faults_by_exercise, faults_by_learner, misconceptions
from .records import FAULTS, ClassRecords, load

LIBRARY_ROOT = REPO / "lib" / "tensorcraft"
JSON_NAME, HTML_NAME, NOTEBOOK_NAME = "report.json", "report.html", "report.ipynb"
CONTEXT = 2             # lines shown around a library file's shared passages


def documents(records: ClassRecords) -> list[similarity.Document]:
    """Per learner and notebook: the attempted solution cells, one after another, each under its name."""
    items = []
    for submission in records.submissions:
        text = "".join(f"# {a.exercise}\n{a.source.rstrip()}\n\n" for a in submission.answers if a.attempted)
        if text:
            items.append((submission.learner, submission.assignment, text))
    return similarity.documents_of(items)


def course_code(course: Course, assignment: str) -> set[int]:
    """The k-grams of a notebook's own code: its source notebook (scaffold, instructor cells, the
    model answer), else its release."""
    path = course.source(assignment) if course.source(assignment).exists() else course.release(assignment)
    notebook = json.loads(path.read_text(encoding="utf-8"))
    return similarity.course_code(["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                                   for c in notebook["cells"] if c.get("cell_type") == "code"])


def excerpt(text: str, marks: list[tuple[int, int]], context: int = CONTEXT) -> tuple[str, list[tuple[int, int]]]:
    """The lines of ``text`` touching a mark, with ``context`` lines around, the rest cut ("..."):
    the excerpt and the marks moved into it."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    keep = set()
    for start, end in marks:
        first = next(i for i in range(len(lines)) if starts[i + 1] > start)
        last = next(i for i in range(first, len(lines)) if starts[i + 1] >= end)
        keep.update(range(max(0, first - context), min(len(lines), last + context + 1)))
    out, moved, previous = "", [], -2
    where: dict[int, int] = {}
    for i in sorted(keep):
        if i != previous + 1:
            out += "...\n"
        where[i] = len(out) - starts[i]
        out += lines[i]
        previous = i
    for start, end in marks:
        line = next(i for i in range(len(lines)) if starts[i + 1] > start)
        moved.append((start + where[line], end + where[line]))
    return out, moved


def similarity_table(course: Course, records: ClassRecords, library_root: Path | None = LIBRARY_ROOT) -> dict:
    docs = documents(records)
    ignored = {a: course_code(course, a) for a in records.layouts}
    library = similarity.library_documents(library_root) if library_root else []
    pairs = []
    for pair in similarity.similar_pairs(docs, ignored, library):
        one_marks, other_marks = pair.marks(ignored.get(pair.one.assignment, set()))
        other_text = pair.other.text
        if pair.other.learner == similarity.LIBRARY:
            other_text, other_marks = excerpt(other_text, other_marks)
        pairs.append({"notebook": pair.one.assignment, "one": pair.one.learner,
                      "other": pair.other.learner if pair.other.learner != similarity.LIBRARY
                      else f"{similarity.LIBRARY}:{pair.other.assignment}",
                      "shared": pair.shared, "similarity": round(pair.similarity, 3),
                      "one_text": pair.one.text, "other_text": other_text,
                      "one_marks": one_marks, "other_marks": other_marks})
    return {"k": similarity.K, "window": similarity.WINDOW, "min_shared": similarity.MIN_SHARED,
            "documents": len(docs), "library_files": len(library), "pairs": pairs}


def report_data(course: Course, records: ClassRecords | None = None, library_root: Path | None = LIBRARY_ROOT) -> dict:
    """Every table of the report, as one JSON-able dict."""
    records = records or load(course)
    return {
        "course": str(course.root),
        "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "learners": len(records.learners),
        "notebooks": sorted(records.layouts),
        "exercises": exercise_table(records),
        "misconceptions": [asdict(m) for m in misconceptions(records)],
        "faults": {"kinds": list(FAULTS), "by_exercise": faults_by_exercise(records),
                   "by_learner": faults_by_learner(records)},
        "learner_table": learner_table(records),
        "similarity": similarity_table(course, records, library_root),
    }


def _write_csv(path: Path, rows: list[dict], columns: list[str]) -> None:
    with path.open("w", newline="", encoding="utf-8") as stream:
        writer = csv.DictWriter(stream, fieldnames=columns, extrasaction="ignore", restval="")
        writer.writeheader()
        writer.writerows(rows)


def write_tables(data: dict, out: Path) -> list[Path]:
    """report.json and one CSV per table."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / JSON_NAME]
    partial = out / (JSON_NAME + ".partial")
    partial.write_text(json.dumps(data, indent=1), encoding="utf-8")
    os.replace(partial, out / JSON_NAME)
    exercises = [{**row, "scores": " ".join(f"{s:g}" for s in row["scores"])} for row in data["exercises"]]
    tables = {
        "exercises.csv": (exercises, ["assignment", "exercise", "exercise_id", "max_score", "submitted", "attempted",
                                      "passed", "difficulty", "point_biserial", "upper_lower", "review", "scores"]),
        "misconceptions.csv": (
            [{"assignment": m["assignment"], "exercise": m["exercise"], "mutant": x["mutant"], "learners": x["learners"],
              "hint": x["hint"]} for m in data["misconceptions"] for x in m["mutants"]]
            + [{"assignment": m["assignment"], "exercise": m["exercise"], "mutant": "", "learners": m["unexplained"],
                "hint": "(no known mistake)"} for m in data["misconceptions"] if m["unexplained"]],
            ["assignment", "exercise", "mutant", "learners", "hint"]),
        "faults_by_exercise.csv": (data["faults"]["by_exercise"], ["assignment", "exercise", *FAULTS]),
        "faults_by_learner.csv": (data["faults"]["by_learner"], ["learner", *FAULTS]),
        "learners.csv": ([{**{k: v for k, v in r.items() if k != "notebooks"}, **r["notebooks"]} for r in data["learner_table"]],
                         ["learner", *data["notebooks"], "total", "max", "share", "attempted", "passed",
                          "attempted_not_passed", "needs_help"]),
        "similarity.csv": (data["similarity"]["pairs"], ["notebook", "one", "other", "shared", "similarity"]),
    }
    for name, (rows, columns) in tables.items():
        _write_csv(out / name, rows, columns)
        written.append(out / name)
    return written


def write_report(course: Course, out: Path | None = None, library_root: Path | None = LIBRARY_ROOT) -> list[Path]:
    """Every file of the report, into ``out`` (default: COURSE/report/)."""
    from .render_html import write_html
    from .render_notebook import write_notebook
    out = out or course.root / "report"
    data = report_data(course, library_root=library_root)
    written = write_tables(data, out)
    written.append(write_html(data, out / HTML_NAME))
    written.append(write_notebook(out / NOTEBOOK_NAME, JSON_NAME))
    return written
