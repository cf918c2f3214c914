"""Shared, expensive fixtures of the grader tests: the course built once, each solution run once.

The suite grades notebooks in many places (``grader check`` on every notebook, the side-by-side
run against nbgrader, the fake, hostile and Dask classes, the exchange), and each autograde batch
first runs the solution of every assignment it grades (its preflight, :mod:`grader.instructor.preflight`).
Within one test session nothing that preflight checks changes between batches of the same
notebook: the same solution, the same sandbox, the same kept-kernel folder. So the first passing
run of a solution, by a preflight or by ``grader check``, which grades the solution through the
same autograde pipeline and demands the same full marks, serves every later batch of the session
(:class:`SolutionRuns`). The tests of the preflight itself run it for real (``real_preflight``).
"""
from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import os
import shutil
from pathlib import Path

import pytest

from grader.instructor import autograde as autograde_module
from grader.instructor import preflight
from grader.worker import compile_cache
from grader.instructor import selfcheck
from grader.instructor.build import build
from grader.course import Course


@pytest.fixture(scope="session")
def built_course(tmp_path_factory) -> tuple[Course, Path]:
    """The whole course built from solutions/ into a fresh course directory and notebooks folder.
    Under pytest-xdist (``make test``) the run builds it once and each process takes a copy of its
    own (a test may rebuild a notebook of it in place)."""
    root = tmp_path_factory.mktemp("built")
    course, notebooks = Course(root / "course"), root / "notebooks"
    if os.environ.get("PYTEST_XDIST_WORKER"):
        made = _built_once(tmp_path_factory.getbasetemp().parent)   # the folder all processes of the run share
        shutil.copytree(made / "course", course.root)
        shutil.copytree(made / "notebooks", notebooks)
    else:
        build(course, notebooks=notebooks)
    return course, notebooks


def _built_once(shared: Path) -> Path:
    """``shared``/built, the course built there by the first process to come; the others wait for it."""
    made = shared / "built"
    with (shared / "built.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (made / "complete").exists():
            shutil.rmtree(made, ignore_errors=True)       # a process that died half-way
            build(Course(made / "course"), notebooks=made / "notebooks")
            (made / "complete").touch()
    return made


class SolutionRuns:
    """Autograde's preflight, run once per solution per session: a later batch of the same solution,
    sandboxed alike and with the same kept-kernel folder, takes the verdict of the first run (a run
    that fails raises :class:`grader.instructor.preflight.SetupError` and is not kept)."""

    def __init__(self, real):
        self.real = real
        self.passed: dict[tuple[str, bool, str], Path | None] = {}
        self.enabled = True

    @staticmethod
    def key(course: Course, assignment: str, sandboxed: bool) -> tuple[str, bool, str]:
        source = hashlib.sha256(course.source(assignment).read_bytes()).hexdigest()
        return source, sandboxed, str(compile_cache.cache_root())

    def __call__(self, course: Course, assignment: str, *, sandboxed: bool, masked, timeout: int, progress: bool = False,
                 pool=None, preload=()):
        """As ``preflight.start_check``: the verdict, as a function to call."""
        key = self.key(course, assignment, sandboxed)
        if self.enabled and key in self.passed and (self.passed[key] is None or self.passed[key].is_dir()):
            return preflight.Check(True, self.passed[key], lambda: self.passed[key])
        check = self.real(course, assignment, sandboxed=sandboxed, masked=masked, timeout=timeout,
                          progress=progress, pool=pool, preload=preload)

        def kept():
            self.passed[key] = check.verdict()
            return self.passed[key]
        return dataclasses.replace(check, verdict=kept)

    def graded_in_full(self, course: Course, assignment: str, sandboxed: bool) -> None:
        """``grader check`` graded the solution with full marks: what the preflight asks, already shown.
        Keep what the preflight would have returned: the kept kernels, where a sandboxed run keeps any."""
        kept = (compile_cache.warm_cache(course, assignment)
                if sandboxed and compile_cache.compiles(course.source(assignment)) else None)
        self.passed[self.key(course, assignment, sandboxed)] = kept


@pytest.fixture(scope="session", autouse=True)
def solution_runs():
    """Every autograde batch of the session goes through one :class:`SolutionRuns`, and so does
    ``grader check``, whose passing solutions count as run."""
    runs = SolutionRuns(autograde_module.start_check)
    real_check = selfcheck.check_notebook

    def check_notebook(course, assignment, workspace, timeout, graded=None):
        verdict = real_check(course, assignment, workspace, timeout, graded)
        if verdict.points and verdict.solution_score == verdict.points and not any(
                p.startswith(("the solution", "solution:")) for p in verdict.problems):
            runs.graded_in_full(course, assignment, autograde_module.sandboxed("auto"))
        return verdict

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(autograde_module, "start_check", runs)
        patch.setattr(selfcheck, "check_notebook", check_notebook)
        yield runs


@pytest.fixture
def real_preflight(solution_runs, monkeypatch):
    """For the tests of the preflight itself: every solution runs, whatever ran before (in this
    session, or in an earlier one that left a passing verdict with the same key)."""
    monkeypatch.setenv("TENSORCRAFT_PREFLIGHT", "always")
    solution_runs.enabled = False
    try:
        yield
    finally:
        solution_runs.enabled = True


@pytest.fixture
def check_from_the_built_course(built_course, monkeypatch):
    """``grader check`` starts its throw-away course directory from the session's build, so that its
    own build (the same solutions, the same config) finds every release current and regenerates none;
    it still writes and compares every learner notebook."""
    real_build = selfcheck.build

    def build_from_the_built_course(course, solutions, notebooks, only=None):
        if not course.root.exists():
            shutil.copytree(built_course[0].root, course.root)
        return real_build(course, solutions, notebooks, only)

    monkeypatch.setattr(selfcheck, "build", build_from_the_built_course)
