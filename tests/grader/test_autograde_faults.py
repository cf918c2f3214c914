"""Nothing is lost under faults: autograde is SIGKILLed at random moments during a batch, then run
again to the end; the gradebook, the CSV and the feedback are complete and consistent, and the
submissions are byte-identical to what was handed in."""
import csv
import hashlib
import html as html_text
import importlib.util
import os
import random
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from nbgrader.api import Gradebook

from grader.course import Course, put_python_scripts_on_path
from grader.instructor.export import CSV_NAME
from grader.worker.sandbox import unavailable

_spec = importlib.util.spec_from_file_location("fake_class", Path(__file__).with_name("fake_class.py"))
fake_class = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fake_class)

LEARNERS = ("correct", "wrong", "untouched", "raises")
KILLS = 3


def _hashes(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _command(submissions: Path, course: Course) -> list[str]:
    return [sys.executable, "-m", "grader", "autograde", str(submissions), "--course", str(course.root),
            "--workers", "2", "--timeout", "30", *(["--unsafe"] if unavailable() else [])]


def _run_and_kill(command: list[str], after: float) -> bool:
    """Start autograde, SIGKILL it (its whole process group) after ``after`` seconds; True if it
    was still running then."""
    run = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        run.wait(timeout=after)
        return False
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
        return True


def test_killed_at_random_moments_then_rerun_loses_nothing(built_course, tmp_path):
    course = Course(tmp_path / "course")
    shutil.copytree(built_course[0].root, course.root)
    submissions = fake_class.write_class(tmp_path / "submissions", LEARNERS)
    handed_in = _hashes(submissions)
    seed = random.randrange(1 << 30)
    draw = random.Random(seed)
    # within the first seconds of a run (start-up, registration, the first notebooks, their saving):
    # a whole run of these four takes longer than that on two cores, so the first kill always lands
    moments = sorted(draw.uniform(0.5, 8.0) for _ in range(KILLS))
    command = _command(submissions, course)
    killed = [_run_and_kill(command, moment) for moment in moments]
    assert any(killed), f"no run was killed (seed {seed}, moments {moments})"

    final = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert final.returncode == 0, f"seed {seed}: {final.stdout}\n{final.stderr}"

    assert _hashes(submissions) == handed_in, f"seed {seed}: a submission changed"
    put_python_scripts_on_path()
    with Gradebook(course.db_url) as gradebook:
        scores = {learner: {g.name: g.score for g in gradebook.find_submission_notebook(
                      "00_welcome", "00_welcome", learner).grades} for learner in LEARNERS}
    assert scores == {learner: fake_class.EXPECTED[learner] for learner in LEARNERS}, f"seed {seed}"
    rows = {row["learner"]: row for row in csv.DictReader((course.root / CSV_NAME).open())}
    assert sorted(rows) == sorted(LEARNERS)
    for learner in LEARNERS:
        assert float(rows[learner]["total"]) == sum(fake_class.EXPECTED[learner].values())
        autograded, feedback = course.autograded(learner, "00_welcome"), course.feedback(learner, "00_welcome")
        assert course.submitted(learner, "00_welcome").read_bytes() == (submissions / learner / "00_welcome.ipynb").read_bytes()
        assert feedback.stat().st_mtime >= autograded.stat().st_mtime
        text = html_text.unescape(re.sub(r"<[^>]+>", "", feedback.read_text()))
        total = sum(fake_class.EXPECTED[learner].values())
        assert f"Score: {total:.1f} / {fake_class.MAX_SCORE:.1f}" in text, f"seed {seed}: {learner}'s feedback"
    assert list(course.root.rglob("*.partial")) == [], f"seed {seed}: a half-written file was left"
