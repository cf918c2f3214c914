"""`python -m grader build`: solutions/*.py -> nbgrader source notebooks -> learner release.

A solution is a jupytext percent script with nbgrader cell metadata in its cell headers. It
becomes the assignment's source notebook in the course directory; nbgrader's
``generate_assignment`` turns that into the release (solutions cut, hidden tests removed,
checksums recorded in the gradebook); the release is copied to notebooks/. The output is
reproducible byte for byte: cell ids come from the nbgrader grade_id or the cell's position,
never from nbformat's random ids.
"""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat

from .home import write_home
from ..kernel.syllabus import read_module
from ..course import DEFAULT_COURSE, NOTEBOOKS, REPO, SOLUTIONS, Course, put_python_scripts_on_path

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


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _committed_sha256(path: Path) -> str | None:
    """The hash of ``path`` as committed in git's HEAD, or None (no git, not committed)."""
    try:
        relative = path.resolve().relative_to(REPO)
        shown = subprocess.run(["git", "show", f"HEAD:{relative.as_posix()}"], cwd=REPO, capture_output=True)
    except (ValueError, OSError):
        return None
    return _sha256(shown.stdout) if shown.returncode == 0 else None


def _safe_to_replace(target: Path, built_before: dict[str, str]) -> bool:
    """A learner notebook may be replaced only if nobody has touched it since it was built or
    committed: running `make course` again must never wipe a learner's answers."""
    if not target.exists():
        return True
    current = _sha256(target.read_bytes())
    return current in (built_before.get(target.name), _committed_sha256(target))


def _release_inputs(course: Course, source: str) -> str:
    """What an assignment's release is made from: its source notebook, the course config and
    nbgrader's version. A build whose inputs are those of the last one skips generate_assignment
    (seconds per notebook): `make instructor` rebuilds only what changed."""
    import nbgrader
    config = (course.root / "nbgrader_config.py").read_bytes()
    return _sha256(source.encode("utf-8") + config + nbgrader.__version__.encode())


def build(course: Course = DEFAULT_COURSE, solutions: Path = SOLUTIONS, notebooks: Path = NOTEBOOKS,
          only: list[str] | None = None, overwrite: bool = False) -> list[Path]:
    """Build every solution (or those named in ``only``); return the learner notebooks now current.
    The course home (``course_home.ipynb``, not an assignment) is rewritten from all of them.

    A learner notebook that was edited since it was built (a learner's work) is left as it is,
    with a warning, unless ``overwrite``; the fresh release is in the course directory.
    """
    known = {s.stem for s in solution_files(solutions)}
    if only and set(only) - known:
        raise BuildError(f"no solution for {sorted(set(only) - known)} in {solutions} (known: {sorted(known)})")
    course.prepare()
    record_path = course.root / "built-notebooks.json"
    built_before = json.loads(record_path.read_text()) if record_path.exists() else {}
    sources_path = course.root / "built-sources.json"
    sources_before = json.loads(sources_path.read_text()) if sources_path.exists() else {}
    written = []
    for solution in solution_files(solutions):
        assignment = solution.stem
        if only and assignment not in only:
            continue
        source = nbformat.writes(source_notebook(solution)) + "\n"
        made_from = _release_inputs(course, source)
        current = all(p.exists() for p in (course.release(assignment), course.source(assignment), course.gradebook))
        if sources_before.get(assignment) != made_from or not current:
            write_notebook(nbformat.reads(source, as_version=4), course.source(assignment))
            sources_before.pop(assignment, None)
            sources_path.write_text(json.dumps(sources_before, indent=1, sort_keys=True))
            generate_assignment(course, assignment)
            sources_before[assignment] = made_from
            sources_path.write_text(json.dumps(sources_before, indent=1, sort_keys=True))
        target = notebooks / f"{assignment}.ipynb"
        fresh = nbformat.writes(learner_notebook(course.release(assignment))) + "\n"
        if target.exists() and target.read_text(encoding="utf-8") == fresh:
            pass
        elif overwrite or _safe_to_replace(target, built_before):
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(fresh, encoding="utf-8")
        else:
            print(f"warning: {target} has changes made since it was built (a learner's work?): left as it is. "
                  f"The fresh release is {course.release(assignment)}; `python -m grader build --overwrite` "
                  "replaces it.", file=sys.stderr)
            continue
        built_before[target.name] = _sha256(fresh.encode("utf-8"))
        written.append(target)
    record_path.write_text(json.dumps(built_before, indent=1, sort_keys=True))
    write_home([read_module(s.stem, source_notebook(s)) for s in solution_files(solutions)], notebooks)
    return written
