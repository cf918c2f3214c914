"""nbgrader's exchange, end to end, with our autograde in the middle.

The instructor releases notebook 00 into a local exchange folder; two learners, each with a home
folder and an nbgrader config of their own, fetch it, answer (one right, one wrong) and submit;
the instructor collects, grades the collected ``submitted/`` folder with ``python -m grader
autograde`` and releases the feedback; each learner fetches their own. Every step is nbgrader's
own command, run as a separate process, as on a JupyterHub.
"""
import html as html_text
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from grader.course import Course, put_python_scripts_on_path

_spec = importlib.util.spec_from_file_location("fake_class", Path(__file__).with_name("fake_class.py"))
fake_class = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fake_class)

ASSIGNMENT = "00_welcome"
ANSWERS = {"alice": "correct", "bob": "wrong"}       # learner -> the fake class's learner they answer as


def run(command: list[str], cwd: Path, home: Path) -> str:
    """One command as its user would run it: their home folder, their config, nothing of ours."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}
    env["HOME"] = str(home)
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout + result.stderr


def nbgrader(*args: str) -> list[str]:
    return [sys.executable, "-m", "nbgrader", *args]


def learner_home(root: Path, learner: str, exchange: Path) -> Path:
    """A learner's home folder whose ~/.jupyter/nbgrader_config.py names the exchange, the course and
    who they are (on a hub the user name comes from the login; here every process runs as one user)."""
    home = root / learner
    (home / ".jupyter").mkdir(parents=True)
    (home / ".jupyter" / "nbgrader_config.py").write_text(
        "c = get_config()\n"
        f"c.Exchange.root = {str(exchange)!r}\n"
        "c.CourseDirectory.course_id = 'tensorcraft'\n"
        f"c.CourseDirectory.student_id = {learner!r}\n")
    return home


def _text(page: Path) -> str:
    """What a reader of the HTML sees: tags (syntax highlighting splits code into spans) removed."""
    return html_text.unescape(re.sub(r"<[^>]+>", "", page.read_text()))


@pytest.fixture(scope="module")
def cycle(built_course, tmp_path_factory):
    """The whole cycle, once; returns the course and each learner's home."""
    root = tmp_path_factory.mktemp("exchange")
    course = Course(root / "course")
    shutil.copytree(built_course[0].root, course.root)
    exchange, instructor = root / "exchange", root / "instructor"
    instructor.mkdir()
    put_python_scripts_on_path()
    at_exchange = f"--Exchange.root={exchange}"

    run(nbgrader("release_assignment", ASSIGNMENT, at_exchange), course.root, instructor)
    homes = {learner: learner_home(root / "homes", learner, exchange) for learner in ANSWERS}
    for learner, home in homes.items():
        run(nbgrader("fetch_assignment", ASSIGNMENT), home, home)
        fetched = home / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
        answers = fake_class.LEARNERS[ANSWERS[learner]]
        nbformat.write(fake_class.answered(nbformat.read(fetched, as_version=4), *answers), fetched)
        run(nbgrader("submit", ASSIGNMENT), home, home)
    run(nbgrader("collect", ASSIGNMENT, at_exchange), course.root, instructor)
    graded = run([sys.executable, "-m", "grader", "autograde", str(course.root / "submitted"),
                  "--course", str(course.root), "--timeout", "60", "--workers", "2"], course.root, instructor)
    run(nbgrader("release_feedback", ASSIGNMENT, at_exchange), course.root, instructor)
    for home in homes.values():
        run(nbgrader("fetch_feedback", ASSIGNMENT), home, home)
    return course, homes, graded


def test_collected_submissions_are_graded_in_place_with_the_learners_scores(cycle):
    course, _, graded = cycle
    assert "2 graded" in graded and "0 errors" in graded
    with Gradebook(course.db_url) as gradebook:
        for learner, answers_as in ANSWERS.items():
            cells = gradebook.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, learner).grades
            assert {g.name: g.score for g in cells} == fake_class.EXPECTED[answers_as]


def test_each_learner_fetches_their_own_feedback_with_score_and_hints_but_no_hidden_tests(cycle):
    _, homes, _ = cycle
    for learner, home in homes.items():
        [page] = (home / ASSIGNMENT / "feedback").glob(f"*/{ASSIGNMENT}.html")
        text = _text(page)
        score = sum(fake_class.EXPECTED[ANSWERS[learner]].values())
        assert f"Score: {score:.1f} / {fake_class.MAX_SCORE:.1f}" in text
        assert not [s for s in fake_class.HIDDEN_SOURCE if s in text]
    transpose = "hint: your result is the transpose"     # the wrong answer's hint: in bob's feedback only
    assert transpose in _text(next((homes["bob"] / ASSIGNMENT / "feedback").glob("*/*.html")))
    assert transpose not in _text(next((homes["alice"] / ASSIGNMENT / "feedback").glob("*/*.html")))


def test_a_resubmission_through_the_exchange_is_graded_again_and_its_feedback_replaces_the_old(cycle, tmp_path):
    course, homes, _ = cycle
    home, exchange = homes["bob"], course.root.parent / "exchange"
    instructor = course.root.parent / "instructor"
    fetched = home / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    nbformat.write(fake_class.answered(nbformat.read(fetched, as_version=4), *fake_class.LEARNERS["correct"]), fetched)
    run(nbgrader("submit", ASSIGNMENT), home, home)
    run(nbgrader("collect", ASSIGNMENT, f"--Exchange.root={exchange}", "--update"), course.root, instructor)
    graded = run([sys.executable, "-m", "grader", "autograde", str(course.root / "submitted"),
                  "--course", str(course.root), "--timeout", "60"], course.root, instructor)
    assert "1 graded, 1 already graded" in graded
    run(nbgrader("release_feedback", ASSIGNMENT, f"--Exchange.root={exchange}"), course.root, instructor)
    run(nbgrader("fetch_feedback", ASSIGNMENT), home, home)
    pages = sorted((home / ASSIGNMENT / "feedback").glob(f"*/{ASSIGNMENT}.html"))
    assert len(pages) == 2, "one feedback folder per submission, named by its timestamp"
    assert f"Score: {fake_class.MAX_SCORE:.1f} / {fake_class.MAX_SCORE:.1f}" in _text(pages[-1])
