"""Partial credit per group of cases: a course setting, off by default. On, a test cell whose check
fails some groups earns its points times the share that passed, under our autograde as under
`nbgrader autograde` (both run the course config's PartialCredit step before the scores are saved)."""
import importlib.util
import shutil
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook
from nbgrader.utils import determine_grade
from traitlets.config import Config

from grader.worker import chains
from grader.instructor.autograde import autograde
from grader.course import Course, put_python_scripts_on_path
from grader.worker.partial_credit import PartialCredit

_spec = importlib.util.spec_from_file_location("fake_class", Path(__file__).with_name("fake_class.py"))
fake_class = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fake_class)

# right for float32, wrong dtype for int64 and float64: fails 1 of outer's 3 public groups
FLOATS_ONLY = "return a[:, None].float() * b[None, :].float()"
ISOLATION = "auto"


def _test_cell(*outputs, points=3):
    return nbformat.v4.new_code_cell("check_outer(outer)", metadata={"nbgrader": {
        "grade": True, "solution": False, "locked": True, "grade_id": "outer_tests", "points": points}},
        outputs=list(outputs))


def _error(ename, evalue):
    return nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=[])


def _scored(cell, enabled):
    config = Config()
    config.PartialCredit.enabled = enabled
    notebook = nbformat.v4.new_notebook(cells=[cell])
    notebook, _ = PartialCredit(config=config)(notebook, {})
    return determine_grade(notebook.cells[0])[0], notebook.cells[0]


def test_the_share_of_groups_that_passed_is_the_share_of_points_only_when_enabled():
    report = nbformat.v4.new_output("stream", name="stdout", text="check_outer: public cases\n  ✗ ...\n")
    failed = _error("AssertionError", "check_outer: 2 of 10 groups failed (see the lines marked ✗ above)")
    assert _scored(_test_cell(report, failed), enabled=False)[0] == 0          # the default: all or nothing
    score, cell = _scored(_test_cell(report, failed), enabled=True)
    assert score == pytest.approx(3 * 8 / 10)
    assert "partial credit: 8 of 10 groups passed: 2.4 of 3 points" in cell.outputs[1].text
    assert cell.outputs[-1].ename == "AssertionError"                        # the failure is still shown
    for cell in (_test_cell(_error("NameError", "name 'outer' is not defined")),           # not a check's failure
                 _test_cell(_error("CellTimeoutError", "past the 30 s limit")),
                 _test_cell(failed, _error("KeyboardInterrupt", "")),                     # more than one error
                 _test_cell(_error("AssertionError", "check_outer: 1 of 1 group failed (...)"))):  # none passed
        assert _scored(cell, enabled=True)[0] == 0
    assert _scored(_test_cell(report), enabled=True)[0] == 3                  # passing: full points as ever


def test_the_course_config_has_the_step_off_by_default():
    steps = chains.build_chains(chains.course_config(), __import__("grader.worker.execute").worker.execute.GuardedExecute)
    [step] = [s for s in steps.autograde if isinstance(s, PartialCredit)]
    assert step.enabled is False


def _scores(course: Course, learner: str) -> dict[str, float]:
    put_python_scripts_on_path()
    with Gradebook(course.db_url) as gradebook:
        return {g.name: g.score for g in gradebook.find_submission_notebook("00_welcome", "00_welcome", learner).grades}


@pytest.mark.kernel
@pytest.mark.parametrize("enabled", [False, True])
def test_autograde_gives_partial_credit_when_the_course_enables_it(built_course, tmp_path, enabled):
    course = Course(tmp_path / "course")
    shutil.copytree(built_course[0].root, course.root)
    with (course.root / "nbgrader_config.py").open("a") as config:
        config.write(f"\nc.PartialCredit.enabled = {enabled}\n")
    (tmp_path / "submissions" / "floats").mkdir(parents=True)
    nbformat.write(fake_class.submission(FLOATS_ONLY, fake_class.CORRECT_ROWS),
                   tmp_path / "submissions" / "floats" / "00_welcome.ipynb")
    summary = autograde(tmp_path / "submissions", course, workers=1, timeout=60, progress=False, isolation=ISOLATION)
    assert summary.errors == []
    points = fake_class.POINTS
    # of outer's four public groups, the two float ones and the meta-device case pass; integers fail
    expected = {"outer_tests": points["outer_tests"] * 3 / 4 if enabled else 0,
                "normalize_rows_tests": points["normalize_rows_tests"]}
    assert _scores(course, "floats") == pytest.approx(expected, abs=0.01)
