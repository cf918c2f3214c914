"""What the class report reads: per learner and exercise, the points, the checks' outcome records and
what went wrong around them, from the autograded notebooks and the scores CSV that `autograde` wrote.

Everything is read as data, never from text: the points from ``autograde-scores.csv`` (one column
per graded cell), the diagnoses from the checks' records (``grader/checks/record.py``: the last one
per check and public/hidden in a test cell; a learner's code runs before the check records), and the
time-outs, dead kernels, cells not run and grading code modified from the error outputs the grader
itself writes outside the kernel (``execute.GuardedExecute``, ``integrity_watch``), by their names.
Which exercise a cell belongs to comes from the release: its solution cell ``<name>`` and test cell
``<name>_tests`` (the course's convention, ``ARCHITECTURE.md``), or the ``check_<name>`` it calls.
"""
from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ...checks.record import MIME
from ...checks.report import NOT_IMPLEMENTED
from ...course import Course
from ..export import CSV_NAME

# The names of the errors the grader writes into a cell outside the kernel, by what went wrong.
FAULT_NAMES = {
    "CellTimeoutError": "timeout",
    "KeyboardInterrupt": "timeout",       # the interrupt the grader sends at the cell's time limit
    "DeadKernelError": "kernel died",
    "CellNotRun": "not run",              # after a dead kernel, or naming a function that hung
    "GradingCodeModified": "grading code modified",
}
FAULTS = ("timeout", "kernel died", "not run", "error", "tripwire", "changed input", "grading code modified")
CHECK_CALL = re.compile(r"\bcheck_(\w+)\s*\(")


@dataclass
class Layout:
    """One assignment's exercises as its release lays them out."""
    assignment: str
    exercises: list[str]                              # in notebook order
    tests: dict[str, list[tuple[str, float]]]         # exercise -> its test cells (grade_id, points)
    stubs: dict[str, str]                             # exercise -> the release's solution cell source
    scaffold: list[str]                               # every code cell's source in the release

    def exercise_of(self, grade_id: str) -> str | None:
        return next((e for e, cells in self.tests.items() if grade_id in (g for g, _ in cells)), None)


@dataclass
class Answer:
    """One learner's answer to one exercise, as graded."""
    learner: str
    assignment: str
    exercise: str                                     # the exercise's name ("outer")
    exercise_id: str                                  # "nb00_welcome.outer"
    score: float
    max_score: float
    source: str                                       # the learner's solution cell
    untouched: bool                                   # the release's stub, as handed out
    records: list[dict] = field(default_factory=list) # the checks' outcome records of its test cells
    faults: list[str] = field(default_factory=list)   # one of FAULTS per thing that went wrong

    @property
    def attempted(self) -> bool:
        return not self.untouched

    @property
    def passed(self) -> bool:
        return self.max_score > 0 and self.score >= self.max_score

    @property
    def failures(self) -> list[dict]:
        """The failed cases of its checks that were answers (not the stub still raising)."""
        return [f for r in self.records for f in r.get("failures", []) if f.get("reason") != NOT_IMPLEMENTED]


@dataclass
class Submission:
    learner: str
    assignment: str
    score: float
    max_score: float
    answers: list[Answer]
    faults: list[str]                                 # every cell's, the notebook's whole


@dataclass
class ClassRecords:
    layouts: dict[str, Layout]                        # assignment -> layout
    submissions: list[Submission]

    @property
    def learners(self) -> list[str]:
        return sorted({s.learner for s in self.submissions})

    def answers(self) -> list[Answer]:
        return [a for s in self.submissions for a in s.answers]


def _nbgrader(cell: dict) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def layout(assignment: str, release: dict) -> Layout:
    """The exercises of a release notebook (JSON), their test cells and points, and its scaffold."""
    exercises, tests, stubs = [], {}, {}
    for cell in release["cells"]:
        meta = _nbgrader(cell)
        if meta.get("solution") and cell.get("cell_type") == "code":
            stubs[meta["grade_id"]] = _source(cell)
    for cell in release["cells"]:
        meta = _nbgrader(cell)
        if not meta.get("grade") or meta.get("solution"):
            continue
        grade_id = meta["grade_id"]
        name = grade_id.removesuffix("_tests")
        if name not in stubs:
            called = CHECK_CALL.search(_source(cell))
            name = called[1] if called else grade_id
        if name not in tests:
            exercises.append(name)
        tests.setdefault(name, []).append((grade_id, float(meta.get("points", 0))))
    scaffold = [_source(c) for c in release["cells"] if c.get("cell_type") == "code"]
    return Layout(assignment, exercises, tests, stubs, scaffold)


def _same_code(one: str, other: str) -> bool:
    return one.split() == other.split()


def cell_faults(cell: dict) -> list[str]:
    """What went wrong in a cell besides its answer, from the grader's own error outputs (by name)."""
    faults = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            ename = output.get("ename", "")
            fault = FAULT_NAMES.get(ename)
            if fault is None and ename != "AssertionError":   # a check's failure is its record's business
                fault = "error"
            if fault and fault not in faults:
                faults.append(fault)
    return faults


def outcome_records(cell: dict) -> list[dict]:
    """The checks' records in a cell's outputs, the last one per check and public/hidden."""
    found: dict[tuple, dict] = {}
    for output in cell.get("outputs", []):
        data = output.get("data", {}) if output.get("output_type") in ("display_data", "execute_result") else {}
        record = data.get(MIME)
        if isinstance(record, str):
            try:
                record = json.loads(record)
            except ValueError:
                continue
        if isinstance(record, dict) and "exercise" in record:
            found[(record.get("exercise"), bool(record.get("hidden")))] = record
    return list(found.values())


def read_submission(learner: str, layout_: Layout, notebook: dict, scores: dict[str, float]) -> Submission:
    """One autograded notebook (JSON) and its row of the scores CSV, as answers per exercise."""
    cells = {}
    for cell in notebook["cells"]:
        grade_id = _nbgrader(cell).get("grade_id")
        if grade_id:
            cells[grade_id] = cell
    answers, every_fault = [], []
    for name in layout_.exercises:
        solution = cells.get(name)
        source = _source(solution) if solution else ""
        records, faults = [], []
        for grade_id, _ in layout_.tests[name]:
            test = cells.get(grade_id, {})
            records += outcome_records(test)
            faults += cell_faults(test)
        if solution is not None:
            faults += [f for f in cell_faults(solution) if f not in faults]
        failures = [f for r in records for f in r.get("failures", [])]
        faults += [fault for reason, fault in (("forbidden", "tripwire"), ("changed input", "changed input"))
                   if any(f.get("reason") == reason for f in failures) and fault not in faults]
        stub = layout_.stubs.get(name)
        still_stub = bool(failures) and all(f.get("reason") == NOT_IMPLEMENTED for f in failures) \
            and not any(r.get("groups", {}).get("passed") for r in records)
        untouched = solution is None or (stub is not None and _same_code(source, stub)) or still_stub
        exercise_id = next((r["exercise"] for r in records), f"nb{layout_.assignment}.{name}")
        answers.append(Answer(learner, layout_.assignment, name, exercise_id,
                              score=sum(scores.get(g, 0.0) for g, _ in layout_.tests[name]),
                              max_score=sum(p for _, p in layout_.tests[name]),
                              source=source, untouched=untouched, records=records, faults=faults))
    for cell in notebook["cells"]:
        every_fault += cell_faults(cell)
    every_fault += [f for a in answers for f in a.faults if f in ("tripwire", "changed input")]
    return Submission(learner, layout_.assignment, score=sum(a.score for a in answers),
                      max_score=sum(a.max_score for a in answers), answers=answers, faults=every_fault)


def read_scores(path: Path) -> dict[tuple[str, str], dict[str, float]]:
    """(learner, assignment) -> {grade_id: points} from the scores CSV (``export.write_csv``)."""
    rows = {}
    with path.open(newline="", encoding="utf-8") as stream:
        for row in csv.DictReader(stream):
            cells = {k: float(v) for k, v in row.items()
                     if k not in ("learner", "assignment", "total", "max") and v not in ("", None) and _number(v)}
            rows[(row["learner"], row["assignment"])] = cells
    return rows


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def load(course: Course, scores_csv: Path | None = None) -> ClassRecords:
    """Every autograded notebook of ``course`` that has a row in the scores CSV."""
    scores_csv = scores_csv or course.root / CSV_NAME
    if not scores_csv.exists():
        raise FileNotFoundError(f"{scores_csv} does not exist: run `python -m grader autograde SUBMISSIONS "
                                f"--course {course.root}` first")
    scores = read_scores(scores_csv)
    layouts: dict[str, Layout] = {}
    submissions = []
    for (learner, assignment), row in sorted(scores.items()):
        autograded = course.autograded(learner, assignment)
        if not autograded.exists():
            continue
        if assignment not in layouts:
            release = json.loads(course.release(assignment).read_text(encoding="utf-8"))
            layouts[assignment] = layout(assignment, release)
        notebook = json.loads(autograded.read_text(encoding="utf-8"))
        submissions.append(read_submission(learner, layouts[assignment], notebook, row))
    return ClassRecords(layouts, submissions)
