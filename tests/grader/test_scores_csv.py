"""Our CSV of scores (its own name, beside nbgrader export's grades.csv) and the printed summary:
the hand-in time, seconds late and a late status of every submission, from nbgrader's gradebook."""
import csv
import datetime
import shutil
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from grader.instructor.autograde import Outcome, Summary, print_summary
from grader.course import Course, put_python_scripts_on_path
from grader.instructor.export import CSV_NAME, write_csv
from grader.instructor.submissions import Submission

# nbgrader's update_or_create_submission trips SQLAlchemy autoflush warnings; autograde ignores them too
pytestmark = pytest.mark.filterwarnings("ignore:.*not in session")

DUE = datetime.datetime(2027, 1, 31, 17, 0, 0)
# learner -> hand-in time (None: no timestamp.txt), seconds late expected, status expected
HANDED_IN = {
    "early": (DUE - datetime.timedelta(minutes=5), 0, "on time"),
    "late": (DUE + datetime.timedelta(hours=16, minutes=30), 16.5 * 3600, "late"),
    "unstamped": (None, "", "no timestamp"),
}


def _course(built_course, where: Path, due: datetime.datetime | None) -> Course:
    course = Course(where)
    shutil.copytree(built_course[0].root, course.root)
    put_python_scripts_on_path()
    with Gradebook(course.db_url) as gradebook:
        gradebook.update_or_create_assignment("00_welcome", duedate=due)
        for learner, (stamp, _, _) in HANDED_IN.items():
            gradebook.update_or_create_student(learner)
            gradebook.update_or_create_submission("00_welcome", learner, **({"timestamp": stamp} if stamp else {}))
    return course


def test_the_csv_has_its_own_name_and_says_when_each_learner_handed_in_and_how_late(built_course, tmp_path):
    course = _course(built_course, tmp_path / "course", DUE)
    rows = {r["learner"]: r for r in csv.DictReader(write_csv(course, course.root / CSV_NAME).open())}
    assert CSV_NAME != "grades.csv"          # nbgrader export's file, in another format
    for learner, (stamp, seconds, status) in HANDED_IN.items():
        row = rows[learner]
        assert row["late"] == status, row
        assert row["timestamp"] == (f"{stamp:%Y-%m-%d %H:%M:%S} UTC" if stamp else "")
        assert row["seconds_late"] == ("" if seconds == "" else str(int(seconds)))
    undated = _course(built_course, tmp_path / "undated", None)
    rows = {r["learner"]: r for r in csv.DictReader(write_csv(undated, undated.root / CSV_NAME).open())}
    assert rows["late"]["late"] == "no due date" and rows["late"]["seconds_late"] == ""


def test_the_printed_summary_shows_the_hand_in_time_and_the_late_ones(built_course, tmp_path, capsys):
    course = _course(built_course, tmp_path / "course", DUE)
    outcomes = [Outcome(Submission(learner, "00_welcome", tmp_path / f"{learner}.ipynb"), "graded")
                for learner in HANDED_IN]
    print_summary(Summary(outcomes, [], None, [], 1.0), course)
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.split()}
    assert "2027-01-31 16:55:00 UTC" in lines["early"] and "on time" in lines["early"]
    assert "2027-02-01 09:30:00 UTC" in lines["late"] and f"late by {int(16.5 * 3600)} s" in lines["late"]
    assert "no timestamp" in lines["unstamped"]
    assert "1 late" in next(line for line in lines.values() if "graded," in line)
