"""The command line: python -m grader build | check | autograde | feedback | report | home."""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from .course import DEFAULT_COURSE, NOTEBOOKS, SOLUTIONS, Course


def _build(args: argparse.Namespace) -> int:
    from .instructor.build import build
    started = time.perf_counter()
    written = build(Course(args.course), args.solutions, args.notebooks, args.only or None, args.overwrite)
    for path in written:
        print(f"built {path}")
    print(f"{len(written)} notebook(s) current, in {time.perf_counter() - started:.1f} s")
    return 0


def _check(args: argparse.Namespace) -> int:
    from .instructor.selfcheck import run_check, table
    verdicts = run_check(args.only or None, timeout=args.timeout)
    print(table(verdicts))
    problems = [f"{v.notebook}: {p}" for v in verdicts for p in v.problems]
    for line in problems:
        print(f"✗ {line}")
    print("all checks pass" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


def _autograde(args: argparse.Namespace) -> int:
    from .instructor.autograde import NoSandboxError, autograde, print_summary
    from .instructor.preflight import SetupError
    course = Course(args.course)
    pool = None
    if args.dask:
        from .instructor.dask_pool import DaskPool
        try:
            pool = DaskPool(args.dask, course)
        except (OSError, RuntimeError) as error:   # no scheduler there, or workers unlike this machine
            print(f"error: cannot grade on the Dask cluster at {args.dask}: {error}", file=sys.stderr)
            return 2
    try:
        summary = autograde(args.submissions, course, workers=args.workers, timeout=args.timeout,
                            csv_path=args.csv, feedback=not args.no_feedback, force=args.force, pool=pool,
                            isolation="unsafe" if args.unsafe else "sandbox")
    except (NoSandboxError, SetupError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted: every notebook graded before the interrupt is saved; run the same command "
              "again to grade the rest (no CSV or feedback was written this time)", file=sys.stderr)
        return 130
    print_summary(summary, course)
    return 1 if summary.errors else 0


def _feedback(args: argparse.Namespace) -> int:
    from .course import put_python_scripts_on_path
    from .instructor.feedback import feedback_exporter, stale_feedback, write_feedback
    put_python_scripts_on_path()
    course = Course(args.course)
    pairs = stale_feedback(course) if not args.all else [
        (p.parts[-3], p.parts[-2]) for p in sorted((course.root / "autograded").glob("*/*/*.ipynb"))]
    exporter = feedback_exporter(course)
    for learner, assignment in pairs:
        print(f"feedback {write_feedback(course, learner, assignment, exporter)}")
    print(f"{len(pairs)} feedback file(s) written")
    return 0


def _report(args: argparse.Namespace) -> int:
    from .instructor.class_report.build import HTML_NAME, write_report
    started = time.perf_counter()
    written = write_report(Course(args.course), args.out)
    for path in written:
        print(f"wrote {path}")
    print(f"class report in {time.perf_counter() - started:.1f} s: open {written[0].parent / HTML_NAME}")
    return 0


def _home(args: argparse.Namespace) -> int:
    from .instructor.home import place_learner_home
    print(f"course home {place_learner_home(args.folder.expanduser())}")
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m grader", description=__doc__)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--course", type=Path, default=DEFAULT_COURSE.root,
                        help="nbgrader course directory (default: build/course)")
    commands = top.add_subparsers(dest="command", required=True)

    build = commands.add_parser("build", parents=[common], help="solutions/*.py -> nbgrader source -> notebooks/ (learner release)")
    build.add_argument("only", nargs="*", help="assignments to build (default: all), e.g. 00_welcome")
    build.add_argument("--solutions", type=Path, default=SOLUTIONS)
    build.add_argument("--notebooks", type=Path, default=NOTEBOOKS)
    build.add_argument("--overwrite", action="store_true",
                       help="replace learner notebooks even when they were edited since they were built")
    build.set_defaults(run=_build)

    check = commands.add_parser("check", help="solutions score full marks, releases zero, every mutant fails")
    check.add_argument("only", nargs="*", help="notebooks to check (default: all), e.g. 00_welcome")
    check.add_argument("--timeout", type=int, default=60, help="seconds a cell may run (default: %(default)s)")
    check.set_defaults(run=_check)

    grade = commands.add_parser("autograde", parents=[common],
                                help="grade SUBMISSIONS/<learner>/<assignment>.ipynb (or nbgrader's submitted/ folder) in parallel")
    grade.add_argument("submissions", type=Path, help="folder with one sub-folder per learner")
    grade.add_argument("--workers", type=int, default=os.cpu_count(),
                       help="notebooks executed at once (default: one per core, here %(default)s)")
    grade.add_argument("--timeout", type=int,
                       help="seconds a cell may run (default: c.Execute.timeout of the course's nbgrader_config.py)")
    grade.add_argument("--csv", type=Path,
                       help="where to write the scores (default: COURSE/autograde-scores.csv; nbgrader export writes COURSE/grades.csv)")
    grade.add_argument("--no-feedback", action="store_true", help="skip writing feedback HTML")
    grade.add_argument("--force", action="store_true", help="regrade submissions already graded")
    grade.add_argument("--dask", metavar="ADDRESS", help="run the notebooks on this Dask scheduler "
                       "(tcp://host:8786) instead of local processes; see grader/instructor/dask_pool.py")
    grade.add_argument("--unsafe", action="store_true",
                       help="run learners' notebooks without a sandbox, with your own rights (only where "
                            "bubblewrap cannot be had, and only for submissions you trust)")
    grade.set_defaults(run=_autograde)

    feedback = commands.add_parser("feedback", parents=[common], help="write feedback HTML (no hidden-test source) for graded notebooks")
    feedback.add_argument("--all", action="store_true", help="rewrite every feedback file, not only stale ones")
    feedback.set_defaults(run=_feedback)

    report = commands.add_parser("report", parents=[common], help="the class report after autograde: per exercise "
                                 "item statistics, misconceptions (mutants matched), faults, learners, similar answers")
    report.add_argument("--out", type=Path, help="folder for report.html, report.json, the CSVs and report.ipynb "
                                                 "(default: COURSE/report)")
    report.set_defaults(run=_report)

    home = commands.add_parser("home", help="write the course home into a learner's folder, linking to the "
                               "notebooks nbgrader fetches there (FOLDER/NN_name/NN_name.ipynb)")
    home.add_argument("folder", type=Path, help="the learner's folder (on a JupyterHub: their home)")
    home.set_defaults(run=_home)
    return top


def main(argv: list[str] | None = None) -> int:
    from .instructor.build import BuildError
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except (BuildError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
