"""`python -m benchmarks grading [--learners N] [--workers W] [--unsafe] [--dask [ADDRESS]] [--assignment A]`: grade a class, ours against nbgrader.

A class of N submissions of notebook 00 (half correct, a quarter with a wrong answer, a quarter
untouched; of another notebook with ``--assignment``: its solution, or its release untouched) is
graded in one run, on copies of the same freshly built course:
`python -m grader autograde` (W parallel workers, each kernel in its sandbox unless --unsafe, forked
from the worker's fork server unless TENSORCRAFT_FORK_KERNELS=off; no feedback HTML, since
nbgrader's autograde writes none), with ``--dask`` the same on a Dask cluster
(a LocalCluster of W one-thread workers, or the scheduler at ADDRESS), and
`nbgrader autograde 00_welcome --create` (sequential, its own executor). All produce the same
scores, which is checked; the table shows wall-clock seconds, submissions per minute, per minute
and worker core (the sizing rule's number: a class of N notebook runs to grade in T minutes needs
about N / (rate per core x T) cores), and each run's speed against nbgrader's.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from grader import kernel_forks
from grader.autograde import autograde, sandboxed
from grader.build import build
from grader.course import NOTEBOOKS, Course, put_python_scripts_on_path

ASSIGNMENT = "00_welcome"
LOCAL_CLUSTER = "local"
ANSWERS = {  # kind -> (outer body, normalize_rows body); None keeps the release's stub
    "correct": ("return a[:, None] * b[None, :]", "return x / x.sum(dim=1, keepdim=True)"),
    "wrong": ("return b[:, None] * a[None, :]", "return x / x.sum(dim=1, keepdim=True)"),
    "untouched": (None, None),
}


def _submission(kind: str, assignment: str, course: Course) -> nbformat.NotebookNode:
    if assignment != ASSIGNMENT:        # no hand-written wrong answers: the solution or the release
        return nbformat.read(course.source(assignment) if kind == "correct" else course.release(assignment),
                             as_version=4)
    notebook = nbformat.read(NOTEBOOKS / f"{ASSIGNMENT}.ipynb", as_version=4)
    outer, rows = ANSWERS[kind]
    for cell in notebook.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id == "outer" and outer:
            cell.source = f"def outer(a, b):\n    {outer}\n"
        if grade_id == "normalize_rows" and rows:
            cell.source = f"def normalize_rows(x):\n    {rows}\n"
    return notebook


def write_class(folder: Path, learners: int, assignment: str = ASSIGNMENT,
                course: Course | None = None) -> dict[str, str]:
    kinds = {}
    for number in range(learners):
        kind = "correct" if number % 2 == 0 else ("wrong" if number % 4 == 1 else "untouched")
        learner = f"learner{number:03d}"
        (folder / learner).mkdir(parents=True)
        nbformat.write(_submission(kind, assignment, course), folder / learner / f"{assignment}.ipynb")
        kinds[learner] = kind
    return kinds


def nbgrader_autograde(course: Course, submissions: Path, assignment: str) -> float:
    """Seconds `nbgrader autograde` takes on the same class, laid out as nbgrader expects."""
    for learner_dir in sorted(submissions.iterdir()):
        target = course.root / "submitted" / learner_dir.name / assignment
        target.mkdir(parents=True)
        shutil.copyfile(learner_dir / f"{assignment}.ipynb", target / f"{assignment}.ipynb")
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "nbgrader", "autograde", assignment, "--create", "--log-level=ERROR"],
                   cwd=course.root, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def _totals(course: Course, learners: list[str], assignment: str) -> dict[str, float]:
    from nbgrader.api import Gradebook
    with Gradebook(course.db_url) as gradebook:
        return {l: gradebook.find_submission_notebook(assignment, assignment, l).score for l in learners}


def _dask_pool(address: str | None, workers: int, course: Course, stack: contextlib.ExitStack):
    """A DaskPool on the scheduler at ``address``, or on a LocalCluster of ``workers`` one-thread workers."""
    from distributed import Client, LocalCluster

    from grader.dask_grading import DaskPool
    if address is None:
        address = stack.enter_context(LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=None))
    client = stack.enter_context(Client(address))
    return DaskPool(client, course), sum(w["nthreads"] for w in client.scheduler_info()["workers"].values())


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks grading", description=__doc__.splitlines()[0])
    parser.add_argument("--learners", type=int, default=40)
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--unsafe", action="store_true", help="our runs without the sandbox (for comparison)")
    parser.add_argument("--dask", nargs="?", const=LOCAL_CLUSTER, metavar="ADDRESS",
                        help="also grade on a Dask cluster: a local one of --workers workers, or ADDRESS")
    parser.add_argument("--assignment", default=ASSIGNMENT, choices=sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")),
                        help="the notebook the class hands in (default: %(default)s)")
    args = parser.parse_args(argv)
    put_python_scripts_on_path()
    isolation = "unsafe" if args.unsafe else "sandbox"
    confined = sandboxed(isolation)       # refuses, and says why, where no sandbox can be had
    runs = []                             # (name, worker cores, seconds, scores)
    with tempfile.TemporaryDirectory(prefix="tensorcraft-bench-") as folder, contextlib.ExitStack() as stack:
        root = Path(folder)
        built = Course(root / "built")
        build(built, notebooks=root / "notebooks", only=[args.assignment])
        kinds = write_class(root / "submissions", args.learners, args.assignment, built)
        learners = sorted(kinds)
        ours = [("python -m grader autograde", None)] + ([("  the same on Dask", args.dask)] if args.dask else [])
        for index, (name, address) in enumerate(ours):
            course = Course(root / f"ours{index}")
            shutil.copytree(built.root, course.root)
            pool, cores = (None, args.workers) if address is None else _dask_pool(
                None if address == LOCAL_CLUSTER else address, args.workers, course, stack)
            started = time.perf_counter()
            summary = autograde(root / "submissions", course, workers=args.workers, feedback=False, progress=False,
                                isolation=isolation, pool=pool)
            runs.append((name, cores, time.perf_counter() - started, _totals(course, learners, args.assignment)))
            if summary.errors:
                print(f"{name}: {len(summary.errors)} errors: {summary.errors[:3]}")
        theirs = Course(root / "nbgrader")
        shutil.copytree(built.root, theirs.root)
        their_seconds = nbgrader_autograde(theirs, root / "submissions", args.assignment)
        runs.append(("nbgrader autograde", 1, their_seconds, _totals(theirs, learners, args.assignment)))
    kernels = "kernels forked from a warm server" if confined and kernel_forks.enabled() else "a new kernel each"
    print(f"{args.learners} submissions of {args.assignment} on {os.cpu_count()} cores "
          f"({'sandboxed' if confined else 'no sandbox'}, {kernels}, {args.workers} workers)")
    print(f"{'grader':<30} {'cores':>5} {'seconds':>8} {'per minute':>11} {'per min/core':>12} {'x nbgrader':>11}")
    for name, cores, seconds, _ in runs:
        rate = 60 * args.learners / seconds
        print(f"{name:<30} {cores:>5} {seconds:8.1f} {rate:11.1f} {rate / cores:12.1f} {their_seconds / seconds:11.2f}")
    agree = all(scores == runs[-1][3] for *_, scores in runs)
    print(f"same scores as nbgrader: {'yes' if agree else 'NO'}; load average at the end: {os.getloadavg()[0]:.1f}")
    return 0 if agree else 1
