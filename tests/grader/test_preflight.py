"""A broken set-up stops autograde before any learner is graded, saying why in one line, instead of
grading the whole class 0; `grader check` says the cause in one line too."""
import importlib.util
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import nbformat
import pytest
from nbgrader.utils import is_grade

from grader.worker import fork_client
from grader.instructor import preflight
from grader.worker import sandbox as sandbox_module
from grader.instructor import selfcheck
from grader.instructor.autograde import Summary, autograde
from grader.cli import main as cli_main
from grader.course import Course
from grader.instructor.preflight import SetupError
from grader.worker.solution_run import shortfall
from grader.worker.sandbox import unavailable

_spec = importlib.util.spec_from_file_location("fake_class", Path(__file__).with_name("fake_class.py"))
fake_class = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fake_class)

needs_sandbox = pytest.mark.skipif(unavailable() is not None, reason=f"no sandbox here: {unavailable()}")
# the preflight itself is under test: it runs every time, not once per session (tests/grader/conftest.py)
pytestmark = pytest.mark.usefixtures("real_preflight")


def _saved(course: Course) -> list[Path]:
    """The autograded notebooks of ``course``: what a saved grade leaves (a learner graded beside a
    preflight may have left an empty folder there, the kernel's working folder when unsandboxed)."""
    return sorted((course.root / "autograded").rglob("*.ipynb"))


def _hide_the_grading_code(monkeypatch):
    """The set-up of the issue: kernels that cannot import the grading code (here: the sandbox does
    not bind the package ``grader``; with kernels started one by one the preflight runs in this
    process, so the change reaches it)."""
    monkeypatch.setenv(fork_client.SWITCH, "off")
    real = sandbox_module._package_folders
    monkeypatch.setattr(sandbox_module, "_package_folders", lambda: [p for p in real() if p.name != "grader"])


@needs_sandbox
def test_a_kernel_that_cannot_import_the_grading_code_stops_the_batch_before_anyone_is_graded(
        built_course, tmp_path, monkeypatch, capsys):
    course = Course(tmp_path / "course")
    shutil.copytree(built_course[0].root, course.root)
    submissions = fake_class.write_class(tmp_path / "submissions", ("correct", "wrong"))
    _hide_the_grading_code(monkeypatch)
    with pytest.raises(SetupError) as stopped:
        autograde(submissions, course, workers=1, timeout=30, progress=False)
    message = str(stopped.value)
    assert "\n" not in message
    assert message.startswith("stopped before grading anyone: the solution of 00_welcome does not score full marks")
    assert "ModuleNotFoundError" in message and "grader" in message
    assert _saved(course) == [], "a learner's grade was saved"
    code = cli_main(["autograde", str(submissions), "--course", str(course.root), "--workers", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: stopped before grading anyone"), err


@needs_sandbox
@pytest.mark.skipif(not fork_client.enabled(), reason="kernels are not forked here (no pidfd, or switched off)")
def test_with_forked_kernels_the_solution_runs_in_a_worker_as_a_learner_and_a_shortfall_stops_the_batch(
        built_course, tmp_path, monkeypatch):
    course = Course(tmp_path / "course")
    shutil.copytree(built_course[0].root, course.root)
    source = nbformat.read(course.source("00_welcome"), as_version=4)
    for cell in source.cells:           # the course's own solution, broken: outer transposed
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "outer":
            cell.source = "def outer(a, b):\n    return b[:, None] * a[None, :]\n"
    nbformat.write(source, course.source("00_welcome"))
    submissions = fake_class.write_class(tmp_path / "submissions", ("correct",))
    monkeypatch.setattr(preflight, "_solution_here", lambda *a, **k: pytest.fail("the solution ran in the parent"))
    with pytest.raises(SetupError) as stopped:
        autograde(submissions, course, workers=1, timeout=30, progress=False)
    assert "does not score full marks in the grading sandbox: it scores" in str(stopped.value)
    assert _saved(course) == [], "a learner's grade was saved"


def test_a_working_set_up_grades_as_before(built_course, tmp_path):
    course = Course(tmp_path / "course")
    shutil.copytree(built_course[0].root, course.root)
    submissions = fake_class.write_class(tmp_path / "submissions", ("correct",))
    summary = autograde(submissions, course, workers=1, timeout=30, progress=False, isolation="auto")
    assert [(o.status, o.score) for o in summary.outcomes] == [("graded", fake_class.MAX_SCORE)]


def test_grader_check_names_the_cause_in_one_line(built_course, tmp_path, monkeypatch):
    """What every cell of a solution whose kernel cannot import the grading code prints, reduced to
    the first error: the cause, not the 27 lines of every cell that failed after it."""
    course = Course(tmp_path / "course")
    shutil.copytree(built_course[0].root, course.root)
    broken = nbformat.read(course.source("00_welcome"), as_version=4)
    for cell in broken.cells:
        if cell.cell_type == "code":
            cell.outputs = [nbformat.v4.new_output("error", ename="ModuleNotFoundError",
                                                   evalue="No module named 'grader'", traceback=[])]

    def graded_as_broken(submissions, course, **_):
        from grader.instructor.autograde import Outcome
        from grader.instructor.submissions import find_submissions
        found, _ = find_submissions(submissions, course.assignments())
        for submission in found:
            target = course.autograded(submission.learner, submission.assignment)
            target.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(broken, target)
        return Summary([Outcome(s, "graded", 0, fake_class.MAX_SCORE) for s in found], [], None, [], 0.0)

    monkeypatch.setattr(selfcheck, "autograde", graded_as_broken)
    verdict = selfcheck.check_notebook(course, "00_welcome", tmp_path, timeout=30)
    assert len(verdict.problems) == 1, verdict.problems
    [line] = verdict.problems
    assert "the solution does not score full marks" in line and "ModuleNotFoundError: No module named 'grader'" in line
    assert f"0/{fake_class.MAX_SCORE:g}" in line


def test_shortfall_is_none_for_full_marks_and_names_the_first_error_otherwise(built_course):
    source = nbformat.read(built_course[0].source("00_welcome"), as_version=4)
    assert shortfall(source) is None                 # no outputs: every test cell passes
    graded = [i for i, c in enumerate(source.cells) if is_grade(c)
              and not c.metadata["nbgrader"].get("solution")]
    source.cells[graded[-1]].outputs = [nbformat.v4.new_output("error", ename="AssertionError",
                                                               evalue="check_x: 1 of 2 groups failed", traceback=[])]
    assert f"cell {graded[-1] + 1}" in shortfall(source) and "AssertionError" in shortfall(source)


# ---------------------------------------------------------------- a passing run's verdict, reused

def _key(course, **changes):
    settings = dict(sandboxed=True, masked=[course.root], timeout=60, forked=True)
    return preflight.verdict_key(course, "00_welcome", **{**settings, **changes})


def test_every_change_a_verdict_depends_on_misses_the_key(built_course, tmp_path, monkeypatch):
    course = Course(tmp_path / "course")
    shutil.copytree(built_course[0].root, course.root)
    code = tmp_path / "code"
    shutil.copytree(Path(preflight.__file__).parent, code / "instructor")
    before = _key(course, code=(code,))
    assert _key(course, code=(code,)) == before, "the key is not stable"
    assert _key(course, code=(code,), masked=[tmp_path / "elsewhere"]) == before, \
        "a masked folder that no readable folder holds changes what no kernel sees"
    misses = {}
    source = course.source("00_welcome")
    original = source.read_bytes()
    source.write_bytes(original.replace(b"def outer(a, b):", b"def outer(a, b):  # edited", 1))
    misses["the notebook"] = _key(course, code=(code,))
    source.write_bytes(original)
    config = course.root / "nbgrader_config.py"
    saved = config.read_text()
    config.write_text(saved + "\nc.Execute.timeout = 7\n")
    misses["the nbgrader config"] = _key(course, code=(code,))
    config.write_text(saved)
    (code / "instructor" / "preflight.py").write_text("# edited\n")
    misses["a file of the course code"] = _key(course, code=(code,))
    shutil.rmtree(code / "instructor")
    shutil.copytree(Path(preflight.__file__).parent, code / "instructor")
    assert _key(course, code=(code,)) == before
    misses["the time limit"] = _key(course, code=(code,), timeout=61)
    misses["forked or not"] = _key(course, code=(code,), forked=False)
    misses["sandboxed or not"] = _key(course, code=(code,), sandboxed=False)
    with monkeypatch.context() as patch:        # a masked folder inside one the kernel reads: the view changes
        patch.setattr(sandbox_module, "_checkouts", lambda: [])
        misses["the sandbox's view"] = _key(course, code=(code,), masked=[Path(preflight.__file__).parent])
    with monkeypatch.context() as patch:
        patch.setattr(sandbox_module.Limits, "__init__", _smaller_limits)
        misses["the sandbox's limits"] = _key(course, code=(code,))
    with monkeypatch.context() as patch:        # torch upgraded (another install of it found first)
        site = tmp_path / "site"
        (site / "torch-99.0.dist-info").mkdir(parents=True)
        (site / "torch-99.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 99.0\n")
        real_site = preflight.site           # (the installed packages only, not what the sandbox binds)
        patch.setattr(preflight, "site", types.SimpleNamespace(
            getsitepackages=lambda: [str(site), *real_site.getsitepackages()],
            getusersitepackages=real_site.getusersitepackages))
        misses["torch's version"] = _key(course, code=(code,))
    with monkeypatch.context() as patch:        # another C compiler first on PATH
        tools = tmp_path / "bin"
        tools.mkdir()
        (tools / "cc").write_text("#!/bin/sh\n")
        (tools / "cc").chmod(0o755)
        patch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
        misses["the C compiler"] = _key(course, code=(code,))
    assert _key(course, code=(code,)) == before
    for change, key in misses.items():
        assert key != before, f"{change} changed, and the key did not"
    assert len(set(misses.values())) == len(misses)


_real_limits_init = sandbox_module.Limits.__init__


def _smaller_limits(self, *args, **kwargs):
    _real_limits_init(self, *args, **kwargs)
    object.__setattr__(self, "memory_bytes", self.memory_bytes // 2)


def test_a_passing_run_is_remembered_and_a_failing_one_is_not(built_course, tmp_path, monkeypatch):
    course = Course(tmp_path / "course")
    shutil.copytree(built_course[0].root, course.root)
    monkeypatch.setenv("TENSORCRAFT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(preflight.RERUN, raising=False)
    runs, verdicts = [], ["it scores 0/3", None, None, None]

    def run_here(*args):
        runs.append(args)
        return verdicts[len(runs) - 1]

    monkeypatch.setattr(preflight, "_solution_here", run_here)
    check = lambda timeout=60: preflight.check_solution(course, "00_welcome", sandboxed=False, masked=[],  # noqa: E731
                                                        timeout=timeout)
    with pytest.raises(SetupError):
        check()
    check()                         # runs again: the failure was not remembered
    assert len(runs) == 2
    check()                         # the same key: the passing run's verdict stands
    assert len(runs) == 2
    monkeypatch.setenv(preflight.RERUN, "always")
    check()
    assert len(runs) == 3
    monkeypatch.delenv(preflight.RERUN)
    check(timeout=500)              # another key (a longer limit): the solution runs
    assert len(runs) == 4


def test_a_copy_of_the_course_elsewhere_has_the_same_key(built_course, tmp_path):
    """A rebuild or a copy (the benchmark's fresh course per batch) is the same course: its path is no part of the key."""
    first, second = Course(tmp_path / "first"), Course(tmp_path / "elsewhere" / "second")
    shutil.copytree(built_course[0].root, first.root)
    shutil.copytree(built_course[0].root, second.root)
    assert _key(first, masked=[first.root]) == _key(second, masked=[second.root])


def test_the_key_is_the_same_in_another_process(built_course, tmp_path):
    """Another run of the grader (another process, another hash seed: sets iterate in another order)
    finds the verdict of the run before."""
    course = Course(tmp_path / "course")
    shutil.copytree(built_course[0].root, course.root)
    program = ("import sys; from pathlib import Path; from grader.course import Course; "
               "from grader.instructor.preflight import verdict_key; "
               "print(verdict_key(Course(Path(sys.argv[1])), '00_welcome', sandboxed=True, "
               "masked=[Path(sys.argv[1])], timeout=60, forked=True))")
    keys = {subprocess.run([sys.executable, "-c", program, str(course.root)], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout.strip() for seed in (1, 2, 3)}
    assert keys == {_key(course, masked=[course.root])}


def test_learners_are_graded_beside_the_preflight_and_no_grade_is_saved_when_it_fails(
        built_course, tmp_path, monkeypatch):
    """A learner whose sandbox needs nothing from the preflight (00 compiles nothing) starts on the other
    worker while the solution runs, not after its verdict: here the verdict waits until the learner's
    notebook has run a cell, then fails; the batch stops, and no grade was saved."""
    import time

    from grader.instructor import autograde as autograde_module
    course = Course(tmp_path / "course")
    shutil.copytree(built_course[0].root, course.root)
    submissions = fake_class.write_class(tmp_path / "submissions", ("correct",))
    marker = tmp_path / "a learner ran"
    handed_in = submissions / "correct" / "00_welcome.ipynb"
    notebook = nbformat.read(handed_in, as_version=4)
    notebook.cells.insert(0, nbformat.v4.new_code_cell(f"open({str(marker)!r}, 'w').close()"))
    nbformat.write(notebook, handed_in)

    def start_check(course, assignment, **options):
        def verdict():
            deadline = time.monotonic() + 120
            while not marker.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            raise SetupError(f"stopped before grading anyone: the learner ran first: {marker.exists()}")
        return preflight.Check(True, None, verdict)   # 00 compiles nothing: its learners' code is known
    monkeypatch.setattr(autograde_module, "start_check", start_check)
    with pytest.raises(SetupError, match="the learner ran first: True"):
        autograde(submissions, course, workers=2, timeout=30, progress=False, isolation="unsafe")
    assert _saved(course) == [], "a grade was saved before the preflight's verdict"
