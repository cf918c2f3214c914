"""Before any learner is graded, each assignment's solution runs once the way a learner's notebook
will (the same sandbox, executor and grading-code check) and must score full marks.

A broken set-up (a kernel that cannot import the grading code, a sandbox that masks the library, a
missing compiler) would otherwise grade the whole class 0, with nothing but a status note per
learner. Here the batch stops before anyone is graded, saying why in one line. For a notebook that
calls a compiler, the same run keeps the compiled code every learner's sandbox starts with
(:mod:`grader.worker.compile_cache`), so it costs nothing extra the first time.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from nbformat.notebooknode import NotebookNode
from nbgrader.utils import determine_grade, is_grade

from ..course import Course
from ..worker.compile_cache import WARM_UP_TIMEOUT, cache_path, compiles, keep, run_solution, warm_cache
from ..worker.sandbox import Sandbox, claim_uid


PREFLIGHT_TIMEOUT = 120   # seconds a cell of the solution may at least take here: its kernel imports torch
                          # itself (a learner's is forked with it imported), maybe on a busy machine; this
                          # run checks the set-up, not speed (`grader check` holds solutions to the limit)


class SetupError(RuntimeError):
    """The course's own solution does not score full marks where learners' notebooks would run."""


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


def check_solution(course: Course, assignment: str, *, sandboxed: bool, masked: list[Path],
                   timeout: int, progress: bool = False) -> Path | None:
    """Run ``assignment``'s solution as grading will; raise :class:`SetupError` when it does not
    score full marks. Returns the kept compiled-code cache learners' sandboxes start with (None: none)."""
    kept = cache_path(course, assignment) if sandboxed and compiles(course.source(assignment)) else None
    making = kept is not None and not kept.exists()
    if making and progress:
        print(f"{assignment}: running its solution once, sandboxed, to compile the code every learner's "
              "sandbox starts with (kept for later runs)", flush=True)
    work = Path(tempfile.mkdtemp(prefix="tensorcraft-preflight-"))
    work.chmod(0o711)
    sandbox = Sandbox(work / "scratch", masked=list(masked), uid=claim_uid()) if sandboxed else None
    try:
        cache = None if making or kept is None else warm_cache(course, assignment)
        notebook, executor = run_solution(course, assignment, sandbox,
                                          WARM_UP_TIMEOUT if making else max(timeout, PREFLIGHT_TIMEOUT),
                                          cache=cache, folder=work)
        integrity = executor.integrity
        problem = shortfall(notebook) or executor.lost or (integrity and (integrity.modified or integrity.problem))
        if problem:
            where = "in the grading sandbox" if sandboxed else "where learners' notebooks run"
            raise SetupError(f"stopped before grading anyone: the solution of {assignment} does not score full "
                             f"marks {where}: {problem}")
        if making:
            keep(sandbox, kept, assignment)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return warm_cache(course, assignment) if kept is not None else None
