"""The command line: python -m grader build | check | autograde | feedback."""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from .course import DEFAULT_COURSE, NOTEBOOKS, SOLUTIONS, Course


def _build(args: argparse.Namespace) -> int:
    from .build import build
    started = time.perf_counter()
    written = build(Course(args.course), args.solutions, args.notebooks, args.only or None)
    for path in written:
        print(f"built {path}")
    print(f"{len(written)} notebook(s) in {time.perf_counter() - started:.1f} s")
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m grader", description=__doc__)
    top.add_argument("--course", type=Path, default=DEFAULT_COURSE.root,
                     help="nbgrader course directory (default: build/course)")
    commands = top.add_subparsers(dest="command", required=True)

    build = commands.add_parser("build", help="solutions/*.py -> nbgrader source -> notebooks/ (learner release)")
    build.add_argument("only", nargs="*", help="assignments to build (default: all), e.g. 00_welcome")
    build.add_argument("--solutions", type=Path, default=SOLUTIONS)
    build.add_argument("--notebooks", type=Path, default=NOTEBOOKS)
    build.set_defaults(run=_build)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return args.run(args)
