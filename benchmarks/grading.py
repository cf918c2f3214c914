"""`python -m benchmarks grading [--learners N] [--workers W] [--unsafe] [--dask [ADDRESS]] [--assignment A | --all] [--profile]`:
grade a class, ours against nbgrader.

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
about N / (rate per core x T) cores), and each run's speed against nbgrader's, then where one submission's time went in our run (its mean
per submission: kernel start, imports, compile and check cells, the other cells, the grader's own
steps around them; the preflight run of the solution, once per batch: ``grader.worker.timings``).
``--profile`` adds each cell's mean seconds; ``--all`` grades a class of every notebook in turn and
ends with one table for the whole course.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat

from grader.worker import fork_client
from grader.instructor.autograde import autograde, sandboxed
from grader.instructor.build import build
from grader.course import NOTEBOOKS, Course, put_python_scripts_on_path
from grader.worker.sandbox import descendants
from grader.worker.timings import CELL, FORKED_CPU, KERNEL_CPU, WORKER_CPU, phase

ASSIGNMENT = "00_welcome"
LOCAL_CLUSTER = "local"
# the breakdown's columns, in order: the cells by kind (grader.worker.timings.cell_kind), then the grader's steps
PHASES = ("kernel start", "imports", "compile", "checks", "cell", "integrity check", "kernel shutdown",
          "compile cache copy", "sandbox reset", "sanitize")
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


class CpuMeter:
    """CPU seconds (user and system) of this process and every process under it while the body runs,
    sampled from /proc every ``PERIOD`` seconds: what a grader costs whatever else the machine runs.
    Not the rusage of waited-for children: a sandbox's processes are killed, not waited for, and a
    forked kernel's parent ignores its end, so their time would be lost. A process's last fraction
    of a period is missed, alike for every grader."""

    PERIOD = 0.25

    def __enter__(self) -> "CpuMeter":
        self._seen: dict[tuple[int, str], float] = {}     # (pid, start time) -> its CPU seconds when last seen
        self._before = self._own()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.seconds = sum(self._seen.values()) + self._own() - self._before

    @staticmethod
    def _own() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    def _watch(self) -> None:
        ticks = os.sysconf("SC_CLK_TCK")
        while not self._stop.wait(self.PERIOD):
            for pid in descendants(os.getpid()):
                with contextlib.suppress(OSError, IndexError, ValueError):
                    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                    self._seen[(pid, fields[19])] = (int(fields[11]) + int(fields[12])) / ticks


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

    from grader.instructor.dask_pool import DaskPool
    if address is None:
        address = stack.enter_context(LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=None))
    client = stack.enter_context(Client(address))
    return DaskPool(client, course), sum(w["nthreads"] for w in client.scheduler_info()["workers"].values())


@dataclass
class Graded:
    """One class of one notebook graded by each grader: (name, worker cores, seconds, scores) per run,
    nbgrader's last; the worker's timings of each submission of our first run, and its parent's; the
    CPU seconds of our first run (every process of it, kernels included) and of nbgrader's."""
    assignment: str
    learners: int
    runs: list[tuple[str, int, float, dict[str, float]]]
    timings: list[dict[str, float]]
    parent: dict[str, float]
    cpu: tuple[float, float]

    def cpu_ratio(self) -> float:
        """nbgrader's CPU seconds over ours: the ratio on one core of a machine nobody else uses."""
        return self.cpu[1] / self.cpu[0]

    @property
    def agree(self) -> bool:
        return all(scores == self.runs[-1][3] for *_, scores in self.runs)

    def ratio(self, index: int = 0) -> float:
        return self.runs[-1][2] / self.runs[index][2]

    def rate_per_core(self, index: int) -> float:
        _, cores, seconds, _ = self.runs[index]
        return 60 * self.learners / seconds / cores


def grade_class(assignment: str, learners: int, workers: int, isolation: str, dask: str | None) -> Graded:
    """Build the course, write a class of ``assignment`` and grade it with each grader, side by side."""
    runs, timings, parent = [], [], {}
    with tempfile.TemporaryDirectory(prefix="tensorcraft-bench-") as folder, contextlib.ExitStack() as stack:
        root = Path(folder)
        built = Course(root / "built")
        build(built, notebooks=root / "notebooks", only=[assignment])
        kinds = write_class(root / "submissions", learners, assignment, built)
        names = sorted(kinds)
        ours = [("python -m grader autograde", None)] + ([("  the same on Dask", dask)] if dask else [])
        for index, (name, address) in enumerate(ours):
            course = Course(root / f"ours{index}")
            shutil.copytree(built.root, course.root)
            pool, cores = (None, workers) if address is None else _dask_pool(
                None if address == LOCAL_CLUSTER else address, workers, course, stack)
            started = time.perf_counter()
            with CpuMeter() as cpu:
                summary = autograde(root / "submissions", course, workers=workers, feedback=False, progress=False,
                                    isolation=isolation, pool=pool)
            runs.append((name, cores, time.perf_counter() - started, _totals(course, names, assignment)))
            if index == 0:
                timings = [o.timings for o in summary.outcomes if o.timings]
                parent, our_cpu = summary.timings, cpu.seconds
            if summary.errors:
                print(f"{name}: {len(summary.errors)} errors: {summary.errors[:3]}")
        theirs = Course(root / "nbgrader")
        shutil.copytree(built.root, theirs.root)
        with CpuMeter() as cpu:
            their_seconds = nbgrader_autograde(theirs, root / "submissions", assignment)
        their_cpu = cpu.seconds
        runs.append(("nbgrader autograde", 1, their_seconds, _totals(theirs, names, assignment)))
    return Graded(assignment, learners, runs, timings, parent, (our_cpu, their_cpu))


def breakdown(timings: list[dict[str, float]]) -> dict[str, float]:
    """Mean seconds per submission in each phase (``PHASES``), with ``other``: the rest of the
    worker's time for it (reading and writing the notebook, the sandbox's clean-up after it)."""
    if not timings:
        return {}
    summed: dict[str, float] = {}
    for submission in timings:
        for step, seconds in submission.items():
            summed[phase(step)] = summed.get(phase(step), 0.0) + seconds
    mean = {name: summed.get(name, 0.0) / len(timings) for name in PHASES}
    mean["other"] = summed.get("worker total", 0.0) / len(timings) - sum(mean.values())
    mean["total"] = summed.get("worker total", 0.0) / len(timings)
    mean["kernel cpu"] = (summed.get(KERNEL_CPU, 0.0) + summed.get(FORKED_CPU, 0.0)) / len(timings)
    mean["worker cpu"] = summed.get(WORKER_CPU, 0.0) / len(timings)
    return mean


def cells(timings: list[dict[str, float]]) -> list[tuple[str, float]]:
    """Each cell's mean seconds over the submissions that ran it, slowest first."""
    ran: dict[str, list[float]] = {}
    for submission in timings:
        for step, seconds in submission.items():
            if step.startswith(CELL):
                ran.setdefault(step, []).append(seconds)
    return sorted(((step, sum(s) / len(s)) for step, s in ran.items()), key=lambda item: -item[1])


def print_class(graded: Graded, profile: bool) -> None:
    print(f"{'grader':<30} {'cores':>5} {'seconds':>8} {'per minute':>11} {'per min/core':>12} {'x nbgrader':>11}")
    for index, (name, cores, seconds, _) in enumerate(graded.runs):
        rate = 60 * graded.learners / seconds
        print(f"{name:<30} {cores:>5} {seconds:8.1f} {rate:11.1f} {rate / cores:12.1f} {graded.ratio(index):11.2f}")
    mean = breakdown(graded.timings)
    if mean:
        print("one submission of ours, mean seconds in a worker: "
              + ", ".join(f"{name} {seconds:.2f}" for name, seconds in mean.items()))
    print("the parent, seconds: " + ", ".join(f"{name} {seconds:.2f}" for name, seconds in graded.parent.items()))
    if profile:
        for step, seconds in cells(graded.timings):
            print(f"    {seconds:7.2f} s  {step}")
    ours, theirs = graded.cpu
    print(f"CPU seconds per submission, every process: ours {ours / graded.learners:.2f}, nbgrader's "
          f"{theirs / graded.learners:.2f} ({graded.cpu_ratio():.2f}x: the ratio per core where nothing else runs)")
    print(f"same scores as nbgrader: {'yes' if graded.agree else 'NO'}; load average now: {os.getloadavg()[0]:.1f}")
    theirs = graded.runs[-1][3]
    for name, _, _, scores in graded.runs[:-1]:
        for learner in sorted(l for l in scores if scores[l] != theirs.get(l)):
            print(f"  {learner}: {scores[learner]} by {name.strip()}, {theirs.get(learner)} by nbgrader")


def print_course(classes: list[Graded]) -> None:
    """The whole course in one table: per notebook, our seconds and nbgrader's, submissions a minute
    per core (ours per worker core: R of the sizing rule), the ratio, and the breakdown."""
    short = {"kernel start": "start", "integrity check": "integr", "kernel shutdown": "stop",
             "compile cache copy": "cache", "sandbox reset": "reset", "sanitize": "sanit"}
    columns = [short.get(name, name) for name in PHASES] + ["other"]
    print(f"{'notebook':<22} {'ours s':>7} {'nbg s':>7} {'R ours':>6} {'R nbg':>6} {'ratio':>6} {'cpu x':>6} "
          f"{'preflt':>6} " + " ".join(f"{c:>6}" for c in columns))
    for graded in classes:
        mean = breakdown(graded.timings)
        print(f"{graded.assignment:<22} {graded.runs[0][2]:7.1f} {graded.runs[-1][2]:7.1f} "
              f"{graded.rate_per_core(0):6.1f} {graded.rate_per_core(-1):6.1f} {graded.ratio():6.2f} "
              f"{graded.cpu_ratio():6.2f} {graded.parent.get('preflight', 0.0):6.1f} "
              + " ".join(f"{mean.get(name, 0.0):6.2f}" for name in (*PHASES, "other")))
    print(f"R: submissions a minute per worker core; ratio: nbgrader's seconds over ours; cpu x: its CPU seconds "
          f"over ours; preflt: the preflight's seconds; then one submission of ours, mean seconds per phase. "
          f"All scores as nbgrader's: {'yes' if all(g.agree for g in classes) else 'NO'}; "
          f"load average now: {os.getloadavg()[0]:.1f}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks grading", description=__doc__.splitlines()[0])
    parser.add_argument("--learners", type=int, default=40)
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--unsafe", action="store_true", help="our runs without the sandbox (for comparison)")
    parser.add_argument("--dask", nargs="?", const=LOCAL_CLUSTER, metavar="ADDRESS",
                        help="also grade on a Dask cluster: a local one of --workers workers, or ADDRESS")
    notebooks = sorted(p.stem for p in NOTEBOOKS.glob("[0-9]*.ipynb"))
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--assignment", nargs="+", default=[ASSIGNMENT], choices=notebooks, metavar="NN_name",
                       help="the notebook(s) the class hands in, one class each (default: %(default)s)")
    which.add_argument("--all", action="store_true", help="a class of every notebook, one after another")
    parser.add_argument("--profile", action="store_true", help="also each cell's mean seconds")
    args = parser.parse_args(argv)
    put_python_scripts_on_path()
    isolation = "unsafe" if args.unsafe else "sandbox"
    confined = sandboxed(isolation)       # refuses, and says why, where no sandbox can be had
    kernels = "kernels forked from a warm server" if confined and fork_client.enabled() else "a new kernel each"
    classes = []
    for assignment in notebooks if args.all else args.assignment:
        print(f"{args.learners} submissions of {assignment} on {os.cpu_count()} cores "
              f"({'sandboxed' if confined else 'no sandbox'}, {kernels}, {args.workers} workers)", flush=True)
        classes.append(grade_class(assignment, args.learners, args.workers, isolation, args.dask))
        print_class(classes[-1], args.profile)
        print(flush=True)
    if len(classes) > 1:
        print_course(classes)
    return 0 if all(graded.agree for graded in classes) else 1
