"""`python -m grader build`: solutions/*.py -> nbgrader source notebooks -> learner release.

A solution is a jupytext percent script with nbgrader cell metadata in its cell headers. It
becomes the assignment's source notebook in the course directory; nbgrader's
``generate_assignment`` turns that into the release (solutions cut, hidden tests removed,
checksums recorded in the gradebook); the release is copied to notebooks/. The output is
reproducible byte for byte: cell ids come from the nbgrader grade_id or the cell's position,
never from nbformat's random ids.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat

from .course import DEFAULT_COURSE, NOTEBOOKS, SOLUTIONS, Course, put_python_scripts_on_path

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


class BuildError(RuntimeError):
    """A solution could not be turned into a release."""


def solution_files(solutions: Path = SOLUTIONS) -> list[Path]:
    return sorted(solutions.glob("[0-9][0-9]_*.py"))


def source_notebook(solution: Path) -> nbformat.NotebookNode:
    """Read a jupytext percent script as a notebook with stable cell ids and fixed metadata."""
    notebook = jupytext.read(solution)
    notebook.nbformat, notebook.nbformat_minor = 4, 5
    notebook.metadata = nbformat.from_dict({"kernelspec": KERNELSPEC, "language_info": {"name": "python"}})
    seen: set[str] = set()
    for position, cell in enumerate(notebook.cells):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        cell.id = grade_id or f"cell-{position:03d}"
        if cell.id in seen:
            raise BuildError(f"{solution}: cell {position} repeats the id {cell.id!r}; grade_ids must be unique")
        seen.add(cell.id)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nbformat.validate(notebook)
    return notebook


def write_notebook(notebook: nbformat.NotebookNode, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(nbformat.writes(notebook) + "\n", encoding="utf-8")


def learner_notebook(release: Path) -> nbformat.NotebookNode:
    """The release as committed: outputs cleared, metadata reduced to what JupyterLab and nbgrader need."""
    notebook = nbformat.read(release, as_version=4)
    notebook.metadata = nbformat.from_dict({"kernelspec": KERNELSPEC, "language_info": {"name": "python"}})
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return notebook


def generate_assignment(course: Course, assignment: str) -> None:
    """Run nbgrader's generate_assignment in the course directory (its config applies)."""
    put_python_scripts_on_path()
    result = subprocess.run(
        [sys.executable, "-m", "nbgrader", "generate_assignment", assignment, "--force", "--log-level=WARN"],
        cwd=course.root, capture_output=True, text=True)
    if result.returncode != 0:
        raise BuildError(f"nbgrader generate_assignment {assignment} failed:\n{result.stdout}{result.stderr}")


def build(course: Course = DEFAULT_COURSE, solutions: Path = SOLUTIONS, notebooks: Path = NOTEBOOKS,
          only: list[str] | None = None) -> list[Path]:
    """Build every solution (or those named in ``only``) and return the learner notebooks written."""
    course.prepare()
    written = []
    for solution in solution_files(solutions):
        assignment = solution.stem
        if only and assignment not in only:
            continue
        write_notebook(source_notebook(solution), course.source(assignment))
        generate_assignment(course, assignment)
        target = notebooks / f"{assignment}.ipynb"
        write_notebook(learner_notebook(course.release(assignment)), target)
        written.append(target)
    if only and len(written) != len(only):
        missing = sorted(set(only) - {p.stem for p in written})
        raise BuildError(f"no solution for {missing} in {solutions}")
    return written
