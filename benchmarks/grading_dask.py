"""Grading a class locally against grading it on a Dask cluster, side by side in one run.

    python -m benchmarks grading_dask [--learners N] [--workers W] [--timeout S] [--scheduler ADDRESS]

The same class of notebook-00 submissions (three in four correct, one in four wrong) is graded
twice from scratch, into two copies of one freshly built course: by `autograde` with W local worker
processes, then by `autograde` with a `DaskPool` on a Dask cluster (a LocalCluster of W one-thread
workers on this machine unless ``--scheduler`` names an existing one). The table gives each run's
wall time, its rate in submissions a minute, that rate per worker core, and the ratio of the two
times (> 1: the cluster is slower). The per-core rate is the sizing rule's number: a class of N
notebook runs to grade in T minutes needs about N / (rate per core x T) worker cores.
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import nbformat

ASSIGNMENT = "00_welcome"
CORRECT = {"outer": "def outer(a, b):\n    return a[:, None] * b[None, :]\n",
           "normalize_rows": "def normalize_rows(x):\n    return x / x.sum(dim=1, keepdim=True)\n"}
WRONG_OUTER = "def outer(a, b):\n    return b[:, None] * a[None, :]\n"


def write_class(release: Path, folder: Path, learners: int) -> Path:
    """``learners`` submissions of the release: every fourth one with a transposed outer product."""
    for index in range(learners):
        notebook = nbformat.read(release, as_version=4)
        for cell in notebook.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if grade_id in CORRECT:
                cell.source = WRONG_OUTER if grade_id == "outer" and index % 4 == 3 else CORRECT[grade_id]
        (folder / f"learner{index:03d}").mkdir(parents=True)
        nbformat.write(notebook, folder / f"learner{index:03d}" / f"{ASSIGNMENT}.ipynb")
    return folder


def _graded(summary) -> tuple[int, float]:
    graded = [o for o in summary.outcomes if o.status == "graded"]
    return len(graded), sum(o.score or 0 for o in graded)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks grading_dask", description=__doc__.split("\n\n")[0])
    parser.add_argument("--learners", type=int, default=16, help="submissions in the class (default: %(default)s)")
    parser.add_argument("--workers", type=int, default=2, help="local processes, and Dask workers (default: %(default)s)")
    parser.add_argument("--timeout", type=int, default=60, help="seconds a cell may run (default: %(default)s)")
    parser.add_argument("--scheduler", help="an existing Dask scheduler to grade on instead of a local cluster")
    args = parser.parse_args(argv)

    from distributed import Client, LocalCluster

    from grader.autograde import autograde
    from grader.build import build
    from grader.course import Course
    from grader.dask_grading import DaskPool

    with tempfile.TemporaryDirectory(prefix="grading-dask-") as scratch:
        root = Path(scratch)
        built = Course(root / "built")
        print(f"building {ASSIGNMENT} ...", flush=True)
        build(built, notebooks=root / "notebooks", only=[ASSIGNMENT])
        submissions = write_class(built.release(ASSIGNMENT), root / "submissions", args.learners)
        runs = []
        for name in ("local", "dask"):
            course = Course(root / name)
            shutil.copytree(built.root, course.root)
            if name == "local":
                print(f"grading {args.learners} submissions with {args.workers} local processes ...", flush=True)
                started = time.perf_counter()
                summary = autograde(submissions, course, workers=args.workers, timeout=args.timeout, progress=False)
                cores = args.workers
            else:
                cluster = None if args.scheduler else LocalCluster(n_workers=args.workers, threads_per_worker=1,
                                                                   dashboard_address=None)
                client = Client(args.scheduler or cluster)
                cores = sum(w["nthreads"] for w in client.scheduler_info()["workers"].values())
                print(f"grading {args.learners} submissions on a Dask cluster of {cores} worker threads ...", flush=True)
                try:
                    started = time.perf_counter()
                    summary = autograde(submissions, course, timeout=args.timeout, progress=False,
                                        pool=DaskPool(client, course))
                finally:
                    client.close()
                    if cluster is not None:
                        cluster.close()
            seconds = time.perf_counter() - started
            runs.append((name, cores, seconds, *_graded(summary)))

    print(f"\n{'run':<6} {'cores':>5} {'graded':>6} {'points':>7} {'seconds':>8} {'per min':>8} {'per min/core':>12}")
    for name, cores, seconds, graded, points in runs:
        rate = graded / seconds * 60
        print(f"{name:<6} {cores:>5} {graded:>6} {points:>7g} {seconds:>8.1f} {rate:>8.1f} {rate / cores:>12.1f}")
    (_, _, local_s, local_n, local_points), (_, _, dask_s, dask_n, dask_points) = runs
    print(f"\ndask / local time: {dask_s / local_s:.2f}x; the same points: {local_points == dask_points}"
          f"; load average at the end: {os.getloadavg()[0]:.1f} (other processes share these cores)")
    return 0 if local_n == dask_n == args.learners and local_points == dask_points else 1
