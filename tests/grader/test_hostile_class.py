"""A class of hostile submissions graded in one parallel batch, each kernel in its sandbox: every
learner gets the score it must, the correct ones keep full marks, nothing outside a sandbox changes."""
import ast
import contextlib
import csv
import hashlib
import html as html_text
import importlib.util
import os
import re
import shutil
import socket
import sys
import threading
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from grader.instructor.autograde import autograde
from grader.course import REPO, Course, put_python_scripts_on_path
from grader.worker.compile_cache import cache_root
from grader.worker.chains import course_config, exchange_root
from grader.worker.sandbox import FIRST_UID, UIDS, unavailable

_here = Path(__file__).parent
for _name in ("fake_class", "hostile_class"):
    _spec = importlib.util.spec_from_file_location(_name, _here / f"{_name}.py")
    _module = importlib.util.module_from_spec(_spec)
    sys.modules[_name] = _module
    _spec.loader.exec_module(_module)
fake_class, hostile_class = sys.modules["fake_class"], sys.modules["hostile_class"]

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=f"no sandbox here: {unavailable()}")
TIMEOUT = 30


class Listener:
    """A TCP server on this machine that records whatever a kernel manages to send it."""

    def __init__(self):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.received: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            with connection:
                self.received.append(connection.recv(1024))


def _hashes(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _orphaned_sandbox_processes() -> list[str]:
    """Processes under a sandbox uid whose notebook is over: their scratch folder was deleted when
    the notebook ended (other runs' live kernels, of other tests or benchmarks, keep theirs)."""
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            uid = int(next(l for l in status.read_text().splitlines() if l.startswith("Uid:")).split()[1])
            cwd = os.readlink(status.parent / "cwd")
        except (OSError, StopIteration, ValueError):
            continue
        if FIRST_UID <= uid < FIRST_UID + UIDS and cwd.endswith("(deleted)"):
            found.append(f"{status.parent.name} in {cwd}")
    return found


@pytest.fixture(scope="module")
def graded(built_course, tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    course = Course(root / "course")
    shutil.copytree(built_course[0].root, course.root)
    submissions = root / "submissions"
    listener = Listener()
    markers = [str(REPO / "lib" / "learner_was_here"), str(Path.home() / "learner_was_here"),
               str(root / "learner_was_here"), str(course.root / "learner_was_here"),
               str(submissions / "learner_was_here"), "/tmp/learner_was_here"]
    with instructor_files(course, submissions) as secrets:
        passing = hostile_class.write_hostile_class(submissions, [str(course.root), str(submissions)], listener.port,
                                                    markers, [str(p) for p in secrets], str(REPO))
        handed_in = _hashes(submissions)
        summary = autograde(submissions, course, workers=2, timeout=TIMEOUT, progress=False, isolation="sandbox")
        yield course, submissions, summary, passing, handed_in, listener, markers, secrets
    for marker in markers:
        Path(marker).unlink(missing_ok=True)


SECRET = "instructor-only-4f1c9e"      # written into the planted instructor files: no output may show it


@contextlib.contextmanager
def instructor_files(course: Course, submissions: Path):
    """Every instructor file a learner must not read, some planted for the test (another course
    directory in the checkout's build/ with a whole class's grades, a submission in nbgrader's
    default exchange): the answers, the history, the tests, the course directories and
    gradebooks, the submissions, the kept kernels, and every folder beside the checkout."""
    planted: list[Path] = []
    other = REPO / "build" / f"other-course-{os.getpid()}"
    (other / "submitted" / "someone").mkdir(parents=True)
    (other / "grades.csv").write_text(f"learner,score\nsomeone,{SECRET}\n")
    planted.append(other)
    exchange = exchange_root(course_config(course.root / "nbgrader_config.py"))
    inbound = exchange / "tensorcraft" / "inbound" / f"someone+00_welcome+{os.getpid()}"
    made = [p for p in (inbound, *inbound.parents) if not p.exists()]     # removed after, deepest first
    try:
        inbound.mkdir(parents=True)
        (inbound / "00_welcome.ipynb").write_text(SECRET)
    except OSError:                 # not ours to write (not root): the folder is still tried below
        made = []
    (course.root / "gradebook.db").exists() or pytest.fail("the course copy has no gradebook")
    secrets = [REPO / "solutions", REPO / "solutions" / "00_welcome.py", REPO / ".git", REPO / "tests",
               REPO / "build", other / "grades.csv", REPO / "pyproject.toml", REPO / "notebooks",
               course.root, course.root / "gradebook.db", course.root / "source", submissions, cache_root(), exchange,
               *[p for p in REPO.parent.iterdir() if p.name != REPO.name]]
    try:
        yield secrets
    finally:
        shutil.rmtree(other, ignore_errors=True)
        (inbound / "00_welcome.ipynb").unlink(missing_ok=True)
        for folder in made:
            with contextlib.suppress(OSError):      # only if still empty: another user's may be there now
                folder.rmdir()


def test_every_learner_gets_the_score_it_must(graded):
    course, _, summary, passing, *_ = graded
    assert {o.submission.learner: o.status for o in summary.outcomes} == {learner: "graded" for learner in passing}, \
        [(o.submission.learner, o.notes) for o in summary.outcomes if o.status != "graded"]
    put_python_scripts_on_path()
    with Gradebook(course.db_url) as gradebook:
        scores = {learner: {g.name: g.score for g in gradebook.find_submission_notebook(
                      "00_welcome", "00_welcome", learner).grades} for learner in passing}
    expected = {learner: {cell: points if cell in cells else 0 for cell, points in fake_class.POINTS.items()}
                for learner, cells in passing.items()}
    assert scores == expected


def test_patching_the_checks_is_named_in_the_notes_and_the_feedback(graded):
    course, _, summary, *_ = graded
    notes = {o.submission.learner: " ".join(o.notes) for o in summary.outcomes}
    for learner, patched in (("patches_compare", "grader.checks.exercise.mismatch"),
                             ("patches_check", "grader.checks.exercise.Exercise.check")):
        assert re.search(r"the grading code was modified at cell \d+", notes[learner]), notes[learner]
        assert patched in notes[learner]
        feedback = html_text.unescape(course.feedback(learner, "00_welcome").read_text())
        assert "the grading code was modified at cell" in feedback
    assert "modified" not in notes["correct"] and "modified" not in notes["keeps_reference"]


def test_nothing_outside_the_sandboxes_changed(graded):
    course, submissions, summary, passing, handed_in, listener, markers, _ = graded
    assert _hashes(submissions) == handed_in, "a submission was changed"
    for learner in passing:
        assert course.submitted(learner, "00_welcome").read_bytes() == (submissions / learner / "00_welcome.ipynb").read_bytes()
    assert [m for m in markers if Path(m).exists()] == []
    assert listener.received == []
    rows = {row["learner"] for row in csv.DictReader(summary.csv.open())}
    assert rows == set(passing)
    assert all(course.feedback(learner, "00_welcome").stat().st_size > 0 for learner in passing)
    assert _orphaned_sandbox_processes() == [], "a sandboxed process outlived its notebook"


def test_the_attacks_were_made_and_refused_inside_the_sandbox(graded):
    """The hostile cells did run (so the sandbox, not a crash, is what stopped them)."""
    course, *_ = graded
    def printed(learner):
        return html_text.unescape(course.autograded(learner, "00_welcome").read_text())
    assert "destroyed outside its folder: 0" in printed("destroyer")
    assert re.search(r"forked \d+", printed("fork_bomb"))
    assert "no network" in printed("network")
    assert printed("writer").count("refused:") == 6


def test_a_learner_reads_no_instructor_file_and_prints_none_into_its_feedback(graded):
    """The reader tried each instructor file and folder, and each was not there: not the answers,
    the history, the tests, a course directory, a gradebook, the submissions, the exchange or a folder
    beside the checkout. Of the checkout it sees only the course code and the environment."""
    course, *_, secrets = graded
    notebook = nbformat.read(course.autograded("reader", "00_welcome"), as_version=4)
    printed = "".join(o.get("text", "") for cell in notebook.cells for o in cell.get("outputs", []))
    feedback = html_text.unescape(course.feedback("reader", "00_welcome").read_text())
    assert "FOUND" not in printed, [line for line in printed.splitlines() if "FOUND" in line][:5]
    assert printed.count("nothing at") == len(secrets), "the reader did not try every file"
    assert SECRET not in printed and SECRET not in feedback
    seen = re.search(r"the checkout holds: (\[[^\]]*\])", printed)[1]
    allowed = {"grader", "lib"} | {p.relative_to(REPO).parts[0] for p in map(Path, (sys.prefix,))
                                   if p.is_relative_to(REPO)}
    assert set(ast.literal_eval(seen)) <= allowed, seen
