"""`python -m benchmarks grading [--learners N] [--workers W] [--unsafe]`: grade a class, ours against nbgrader.

A class of N submissions of notebook 00 (half correct, a quarter with a wrong answer, a quarter
untouched) is graded twice in one run, on two copies of the same freshly built course:
`python -m grader autograde` (parallel, each kernel in its sandbox unless --unsafe; no feedback
HTML, since nbgrader's autograde writes none) and `nbgrader autograde 00_welcome --create`
(sequential, its own executor). Both produce the same scores, which is checked; the table shows
wall-clock seconds, submissions per minute and the ratio.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from grader.autograde import autograde, sandboxed
from grader.build import build
from grader.course import NOTEBOOKS, Course, put_python_scripts_on_path

ASSIGNMENT = "00_welcome"
ANSWERS = {  # kind -> (outer body, normalize_rows body); None keeps the release's stub
    "correct": ("return a[:, None] * b[None, :]", "return x / x.sum(dim=1, keepdim=True)"),
    "wrong": ("return b[:, None] * a[None, :]", "return x / x.sum(dim=1, keepdim=True)"),
    "untouched": (None, None),
}


def _submission(kind: str) -> nbformat.NotebookNode:
    notebook = nbformat.read(NOTEBOOKS / f"{ASSIGNMENT}.ipynb", as_version=4)
    outer, rows = ANSWERS[kind]
    for cell in notebook.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id == "outer" and outer:
            cell.source = f"def outer(a, b):\n    {outer}\n"
        if grade_id == "normalize_rows" and rows:
            cell.source = f"def normalize_rows(x):\n    {rows}\n"
    return notebook


def write_class(folder: Path, learners: int) -> dict[str, str]:
    kinds = {}
    for number in range(learners):
        kind = "correct" if number % 2 == 0 else ("wrong" if number % 4 == 1 else "untouched")
        learner = f"learner{number:03d}"
        (folder / learner).mkdir(parents=True)
        nbformat.write(_submission(kind), folder / learner / f"{ASSIGNMENT}.ipynb")
        kinds[learner] = kind
    return kinds


def nbgrader_autograde(course: Course, submissions: Path) -> float:
    """Seconds `nbgrader autograde` takes on the same class, laid out as nbgrader expects."""
    for learner_dir in sorted(submissions.iterdir()):
        target = course.root / "submitted" / learner_dir.name / ASSIGNMENT
        target.mkdir(parents=True)
        shutil.copyfile(learner_dir / f"{ASSIGNMENT}.ipynb", target / f"{ASSIGNMENT}.ipynb")
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "nbgrader", "autograde", ASSIGNMENT, "--create", "--log-level=ERROR"],
                   cwd=course.root, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def _totals(course: Course, learners: list[str]) -> dict[str, float]:
    from nbgrader.api import Gradebook
    with Gradebook(course.db_url) as gradebook:
        return {l: gradebook.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, l).score for l in learners}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks grading", description=__doc__.splitlines()[0])
    parser.add_argument("--learners", type=int, default=40)
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--unsafe", action="store_true", help="our run without the sandbox (for comparison)")
    args = parser.parse_args(argv)
    put_python_scripts_on_path()
    isolation = "unsafe" if args.unsafe else "sandbox"
    confined = sandboxed(isolation)       # refuses, and says why, where no sandbox can be had
    with tempfile.TemporaryDirectory(prefix="tensorcraft-bench-") as folder:
        root = Path(folder)
        ours, theirs = Course(root / "ours"), Course(root / "nbgrader")
        build(ours, notebooks=root / "notebooks", only=[ASSIGNMENT])
        shutil.copytree(ours.root, theirs.root)
        kinds = write_class(root / "submissions", args.learners)

        started = time.perf_counter()
        summary = autograde(root / "submissions", ours, workers=args.workers, feedback=False, progress=False,
                            isolation=isolation)
        our_seconds = time.perf_counter() - started
        their_seconds = nbgrader_autograde(theirs, root / "submissions")

        learners = sorted(kinds)
        agree = _totals(ours, learners) == _totals(theirs, learners)
        errors = len(summary.errors)
    print(f"{args.learners} submissions of {ASSIGNMENT} on {os.cpu_count()} cores "
          f"({'sandboxed' if confined else 'no sandbox'}, {args.workers} workers)")
    print(f"{'grader':<34} {'seconds':>8} {'per minute':>11} {'× nbgrader':>11}")
    for name, seconds in ((f"python -m grader autograde", our_seconds), ("nbgrader autograde", their_seconds)):
        print(f"{name:<34} {seconds:8.1f} {60 * args.learners / seconds:11.1f} {their_seconds / seconds:11.2f}")
    print(f"same scores as nbgrader: {'yes' if agree else 'NO'}; errors: {errors}")
    return 0 if agree and not errors else 1
