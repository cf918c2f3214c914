"""The course's own solution run as a learner's notebook will be: how a preflight (``grader.instructor.preflight``)
tells a set-up that would grade everyone 0, in one line.

:func:`solution_in_a_worker` is a task of a local grading pool: it runs in a worker, its kernel forked from
that worker's fork server, in the sandbox a learner's notebook gets, so the preflight checks the very path
learners take. :func:`shortfall` and :func:`problem_of` say why an executed solution does not count as a pass.
"""
from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.notebooknode import NotebookNode
from nbgrader.utils import determine_grade, is_grade

from . import fork_client
from ..course import Course
from .compile_cache import keep
from .execute import GuardedExecute, _fill, _grading_environment
from .sandbox import claim_uid
from .timings import Timings


def _first_error(notebook: NotebookNode) -> str | None:
    for index, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []):
            if output.output_type == "error":
                grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
                where = f"cell {index + 1}" + (f" ({grade_id})" if grade_id else "")
                return f"{where}: {output.ename}: {output.evalue}".strip()
    return None


def shortfall(notebook: NotebookNode) -> str | None:
    """Why an executed solution does not score full marks, in one line (its score and its first
    error: the cause, not the cells that failed after it), or None when it does."""
    score = maximum = 0.0
    for cell in notebook.cells:
        if is_grade(cell):
            got, most = determine_grade(cell)
            if got is not None:
                score, maximum = score + got, maximum + most
    if score >= maximum:
        return None
    return f"it scores {score:g}/{maximum:g}" + (f"; the first error: {error}" if (error := _first_error(notebook)) else "")


def problem_of(notebook: NotebookNode, executor) -> str | None:
    """Why a run of the solution does not count as a pass, in one line (None: it does)."""
    integrity = executor.integrity
    return shortfall(notebook) or executor.lost or (integrity and (integrity.modified or integrity.problem)) or None


def solution_in_a_worker(root: Path, assignment: str, masked: tuple[Path, ...], timeout: int,
                         cache: Path | None, keep_as: Path | None, preload: tuple[str, ...] = ()) -> str | None:
    """A pool task: run the solution of ``assignment`` (course at ``root``) as this worker runs a
    learner's notebook: in its sandbox, starting with a copy of ``cache``, the kernel forked from its
    fork server. Returns why it does not score full marks (None: it does); with ``keep_as``, keeps
    what it compiled there; ``preload``: the batch's (``fork_client.preload_for``). The sandbox is emptied
    for the next learner on the way out."""
    source = Course(root).source(assignment)
    with _grading_environment(), fork_client.sandbox_for_a_learner(list(masked), claim_uid(), preload) as sandbox:
        _fill(sandbox, source, cache, Timings())
        executor = GuardedExecute(sandbox=sandbox, timeout=timeout, assignment=assignment, fork=True)
        notebook, _ = executor.preprocess(nbformat.read(source, as_version=4),
                                          {"metadata": {"path": str(sandbox.scratch)}})
        problem = problem_of(notebook, executor)
        if problem is None and keep_as is not None:
            keep(sandbox, keep_as, assignment)
    return problem
