"""python -m grader autograde, end to end on notebook 00 with a small fake class."""
import csv
import html as html_text
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook
from nbgrader.utils import is_grade

from grader.instructor.autograde import autograde
from grader.course import Course, put_python_scripts_on_path
from grader.worker.sandbox import unavailable

_spec = importlib.util.spec_from_file_location("fake_class", Path(__file__).with_name("fake_class.py"))
fake_class = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fake_class)

# sandboxed where bubblewrap can run (test_hostile_class proves the sandbox itself); else unconfined
ISOLATION = "auto"
TIMEOUT = 10  # seconds per cell: short, so the looping learner is interrupted soon; long enough to import torch on a busy machine


def fresh_course(built_course, where: Path) -> Course:
    course, _ = built_course
    shutil.copytree(course.root, where)
    return Course(where)


def recorded_scores(course: Course, learners=tuple(fake_class.LEARNERS)) -> dict[str, dict[str, float]]:
    put_python_scripts_on_path()
    with Gradebook(course.db_url) as gradebook:
        return {learner: {g.name: g.score for g in gradebook.find_submission_notebook(
                    "00_welcome", "00_welcome", learner).grades}
                for learner in learners}


@pytest.fixture(scope="module")
def graded(built_course, tmp_path_factory):
    root = tmp_path_factory.mktemp("autograde")
    course = fresh_course(built_course, root / "course")
    submissions = fake_class.write_class(root / "submissions")
    summary = autograde(submissions, course, workers=2, timeout=TIMEOUT, progress=False, isolation=ISOLATION)
    return course, submissions, summary


def test_every_learner_gets_the_right_score_and_the_batch_finishes(graded):
    course, _, summary = graded
    assert sorted(o.submission.learner for o in summary.outcomes) == sorted(fake_class.LEARNERS)
    assert [o for o in summary.outcomes if o.status != "graded"] == []
    assert recorded_scores(course) == fake_class.EXPECTED
    notes = {o.submission.learner: " ".join(o.notes) for o in summary.outcomes}
    assert "kernel died" in notes["kills"]


def test_a_timeout_and_a_dead_kernel_leave_errors_in_the_autograded_cells(graded):
    course, _, _ = graded
    def errors(learner):
        nb = nbformat.read(course.autograded(learner, "00_welcome"), as_version=4)
        return {c.metadata["nbgrader"]["grade_id"]: [o.ename for o in c.outputs if o.output_type == "error"]
                for c in nb.cells if is_grade(c)}
    assert "KeyboardInterrupt" in errors("loops")["outer_tests"] or "CellTimeoutError" in errors("loops")["outer_tests"]
    assert errors("kills") == {"outer_tests": ["DeadKernelError"], "normalize_rows_tests": ["CellNotRun"]}
    assert errors("correct") == {"outer_tests": [], "normalize_rows_tests": []}
    # the learner reads the limit it ran past in its feedback
    assert f"this cell ran past its {TIMEOUT} s time limit" in _text(course.feedback("loops", "00_welcome"))


def test_csv_holds_per_exercise_and_total_scores(graded):
    course, _, summary = graded
    rows = list(csv.DictReader(summary.csv.open()))
    assert summary.csv == course.root / "autograde-scores.csv"   # not nbgrader export's grades.csv
    assert list(rows[0]) == ["learner", "assignment", "normalize_rows_tests", "outer_tests", "total", "max",
                             "timestamp", "seconds_late", "late", "late_penalty"]
    by_learner = {row["learner"]: row for row in rows}
    assert sorted(by_learner) == sorted(fake_class.LEARNERS)
    for learner, expected in fake_class.EXPECTED.items():
        row = by_learner[learner]
        assert {k: float(row[k]) for k in expected} == expected
        assert float(row["total"]) == sum(expected.values()) and float(row["max"]) == fake_class.MAX_SCORE
        assert float(row["late_penalty"]) == 0          # no timestamp.txt: on time
        assert (row["timestamp"], row["seconds_late"], row["late"]) == ("", "", "no timestamp")


def _text(page: Path) -> str:
    """What a reader of the HTML sees: tags (syntax highlighting splits code into spans) removed."""
    return html_text.unescape(re.sub(r"<[^>]+>", "", page.read_text()))


def test_feedback_shows_scores_and_outputs_but_no_hidden_test_source(graded):
    course, _, summary = graded
    assert len(summary.feedback) == len(fake_class.LEARNERS)
    for learner in fake_class.LEARNERS:
        html = _text(course.feedback(learner, "00_welcome"))
        leaked = [s for s in fake_class.HIDDEN_SOURCE if s in html]
        assert not leaked, f"{learner}'s feedback shows hidden-test source {leaked}"
        assert "check_outer(outer)" in html
    correct = _text(course.feedback("correct", "00_welcome"))
    assert "hidden randomized cases, seed" in correct and f"Score: {fake_class.MAX_SCORE:.1f} / {fake_class.MAX_SCORE:.1f}" in correct
    assert "hint: your result is the transpose" in _text(course.feedback("wrong", "00_welcome"))


def test_a_rerun_is_idempotent_and_regrades_only_what_changed(graded):
    course, submissions, first = graded
    before = {l: course.autograded(l, "00_welcome").stat().st_mtime_ns for l in fake_class.LEARNERS}
    csv_before = first.csv.read_bytes()
    again = autograde(submissions, course, workers=2, timeout=TIMEOUT, progress=False, isolation=ISOLATION)
    assert {o.status for o in again.outcomes} == {"skipped"} and again.feedback == []
    assert {l: course.autograded(l, "00_welcome").stat().st_mtime_ns for l in fake_class.LEARNERS} == before
    assert again.csv.read_bytes() == csv_before
    # the wrong learner hands in a fixed notebook: only that one is graded again
    nbformat.write(fake_class.submission(fake_class.CORRECT_OUTER, fake_class.CORRECT_ROWS),
                   submissions / "wrong" / "00_welcome.ipynb")
    fixed = autograde(submissions, course, workers=2, timeout=TIMEOUT, progress=False, isolation=ISOLATION)
    assert {o.submission.learner for o in fixed.outcomes if o.status == "graded"} == {"wrong"}
    assert recorded_scores(course)["wrong"] == fake_class.EXPECTED["correct"]


def test_a_broken_resubmission_is_an_error_that_says_the_old_grade_stays(graded):
    course, submissions, _ = graded
    handed_in = submissions / "untouched" / "00_welcome.ipynb"
    original = handed_in.read_bytes()
    try:
        handed_in.write_text("not a notebook")
        again = autograde(submissions, course, workers=1, timeout=TIMEOUT, progress=False, feedback=False, isolation=ISOLATION)
        [broken] = [o for o in again.outcomes if o.status == "error"]
        assert broken.submission.learner == "untouched"
        assert "still hold the grade of this learner's previous submission" in " ".join(broken.notes)
    finally:
        handed_in.write_bytes(original)


def test_a_rebuilt_assignment_with_changed_tests_counts_as_not_graded(graded, tmp_path):
    from grader.instructor.autograde import _is_done
    from grader.instructor.submissions import find_submissions
    course, submissions, _ = graded
    found, _ = find_submissions(submissions, ["00_welcome"])
    assert all(_is_done(course, s) for s in found)
    source = course.source("00_welcome")
    original = source.read_bytes()
    try:
        source.write_bytes(original.replace(b"check_outer(outer)", b"check_outer(outer)  # stricter", 1))
        assert not any(_is_done(course, s) for s in found)
    finally:
        source.write_bytes(original)
    assert all(_is_done(course, s) for s in found)


def test_nbgraders_own_commands_work_on_the_course(graded):
    course, _, _ = graded
    put_python_scripts_on_path()
    result = subprocess.run([sys.executable, "-m", "nbgrader", "export", "--to", "nbgrader-export.csv"],
                            cwd=course.root, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader((course.root / "nbgrader-export.csv").open()))
    welcome = {r["student_id"]: float(r["score"]) for r in rows if r["assignment"] == "00_welcome"}
    assert welcome["correct"] == fake_class.MAX_SCORE and welcome["untouched"] == 0
    result = subprocess.run([sys.executable, "-m", "nbgrader", "export"], cwd=course.root, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (course.root / "grades.csv").exists() and graded[2].csv.read_text().startswith("learner,assignment,")


def test_a_run_killed_half_way_resumes_without_regrading(built_course, tmp_path):
    course = fresh_course(built_course, tmp_path / "course")
    learners = ("correct", "untouched", "wrong", "raises")    # the quick ones
    submissions = fake_class.write_class(tmp_path / "submissions", learners)
    command = [sys.executable, "-m", "grader", "autograde", str(submissions), "--course", str(course.root),
               "--workers", "1", "--timeout", str(TIMEOUT), *(["--unsafe"] if unavailable() else [])]
    done = fake_class.autograde_killed_half_way(command, course.root, within=300)   # the preflight runs first
    assert 0 < len(done) < len(learners), "the run was not stopped half-way"
    graded_before = {l: course.autograded(l, "00_welcome").stat().st_mtime_ns for l in done}
    resumed = autograde(submissions, course, workers=2, timeout=TIMEOUT, progress=False, isolation=ISOLATION)
    status = {o.submission.learner: o.status for o in resumed.outcomes}
    assert {l for l, s in status.items() if s == "skipped"} == done
    assert {l for l, s in status.items() if s == "graded"} == set(learners) - done
    assert {l: course.autograded(l, "00_welcome").stat().st_mtime_ns for l in done} == graded_before
    assert recorded_scores(course, learners) == {l: fake_class.EXPECTED[l] for l in learners}
