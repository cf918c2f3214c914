"""Before any grade is saved, each assignment's solution runs once the way a learner's notebook
will (the same sandbox, executor and grading-code check) and must score full marks.

A broken set-up (a kernel that cannot import the grading code, a sandbox that masks the library, a
missing compiler) would otherwise grade the whole class 0, with nothing but a status note per
learner. Here the batch stops before any grade is saved, saying why in one line. The learners whose
sandboxes need nothing from this run (no compiled code, or the code kept by an earlier batch) are
graded beside it on the other workers (:func:`start_check`, :class:`Check`; at 12 learners the run was a third of a
batch, most of it with a worker idle), and their grades wait for its verdict. For a notebook that
calls a compiler, the same run keeps the compiled code every learner's sandbox starts with
(:mod:`grader.worker.compile_cache`), so it costs nothing extra the first time.

Where the learners' kernels will be forked from the workers' fork servers (a local pool, sandboxed),
the solution runs the same way: as the first notebook of a worker, in its sandbox, its kernel forked
from its server (:func:`grader.worker.solution_run.solution_in_a_worker`). That checks the very path learners take, and spares a
fresh kernel importing torch, Dynamo and the checks once more (5-8 CPU s on two busy cores); the
server then hands the ground truths it computed meanwhile to every learner after.

A passing run is remembered (a file under the kept compiled code's folder, ``preflight-passed/``), keyed
by everything its verdict depends on (:func:`verdict_key`): the solution notebook, the course's nbgrader
configuration, the course code (the packages ``grader`` and ``tensorcraft``, every file), the sandbox's
settings (what a kernel sees, its environment and limits: ``Sandbox.settings``), whether kernels are
forked, the cell time limit, Python, the installed packages and their versions (torch's among them),
and the C and C++ compilers. A later batch whose key matches (and whose kept compiled code is
there) skips the run: one solution run per notebook, about one learner's CPU seconds (5-8 on the
compiler notebooks), saved on every batch after the first. ``TENSORCRAFT_PREFLIGHT=always`` runs it
anyway; a failing run is never remembered.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import site
import sys
import tempfile
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


from ..worker import fork_client
from ..course import Course
from ..worker.compile_cache import (COMPILERS, WARM_UP_TIMEOUT, cache_path, cache_root, compiles, keep, run_solution,
                                    tool, warm_cache)
from ..worker.sandbox import FIRST_UID, Sandbox, claim_uid
from ..worker.solution_run import problem_of, solution_in_a_worker


PREFLIGHT_TIMEOUT = 120   # seconds a cell of the solution may at least take here: its kernel imports torch
                          # itself (a learner's is forked with it imported), maybe on a busy machine; this
                          # run checks the set-up, not speed (`grader check` holds solutions to the limit)


PASSED = "preflight-passed"      # under the kept compiled code's folder: one empty file per passing run's key
RERUN = "TENSORCRAFT_PREFLIGHT"  # "always": run every solution, even one whose key a passing run left


class SetupError(RuntimeError):
    """The course's own solution does not score full marks where learners' notebooks would run."""


def check_solution(course: Course, assignment: str, *, sandboxed: bool, masked: list[Path],
                   timeout: int, progress: bool = False, pool: Executor | None = None,
                   preload: tuple[str, ...] = ()) -> Path | None:
    """Run ``assignment``'s solution as grading will; raise :class:`SetupError` when it does not
    score full marks. Returns the kept compiled code learners' sandboxes start with (None: none).
    ``pool``: the local workers that will grade, each with its fork server; the solution then runs
    in one of them as a learner's notebook will (:func:`grader.worker.solution_run.solution_in_a_worker`), else here;
    ``preload``: what the batch's fork servers import (``fork_client.preload_for``)."""
    return start_check(course, assignment, sandboxed=sandboxed, masked=masked, timeout=timeout,
                       progress=progress, pool=pool, preload=preload).verdict()


@dataclass(frozen=True)
class Check:
    """A preflight under way. ``known``: the compiled code learners' sandboxes start with is known
    already (``code``: none, or what an earlier batch kept), so they may be graded beside the run; not
    where this run is to make it. ``verdict()`` waits for the run, raises :class:`SetupError` or
    returns the code learners start with."""
    known: bool
    code: Path | None
    verdict: Callable[[], Path | None]


def start_check(course: Course, assignment: str, *, sandboxed: bool, masked: list[Path],
                timeout: int, progress: bool = False, pool: Executor | None = None,
                preload: tuple[str, ...] = ()) -> Check:
    """:func:`check_solution` in two steps: the solution's run is queued in ``pool`` now (where it runs
    in a worker), and the check's ``verdict()`` waits for it (running it here otherwise). Learners'
    notebooks queued in between run beside the solution's."""
    kept = cache_path(course, assignment) if sandboxed and compiles(course.source(assignment)) else None
    making = kept is not None and not kept.exists()
    if making and progress:
        print(f"{assignment}: running its solution once, sandboxed, to compile the code every learner's "
              "sandbox starts with (kept for later runs)", flush=True)
    limit = WARM_UP_TIMEOUT if making else max(timeout, PREFLIGHT_TIMEOUT)
    forked = pool is not None and sandboxed and fork_client.enabled()
    passed = _passed(course, assignment, verdict_key(course, assignment, sandboxed=sandboxed, masked=masked,
                                                      timeout=limit, forked=forked))
    code = None if making or kept is None else warm_cache(course, assignment)   # kept already: nothing runs
    if not (making or not passed.exists() or os.environ.get(RERUN, "").lower() == "always"):
        return Check(True, code, lambda: code)
    if forked:
        run = pool.submit(solution_in_a_worker, course.root, assignment, tuple(masked), limit, code,
                          kept if making else None, preload).result
    else:
        run = functools.partial(_solution_here, course, assignment, sandboxed, masked, limit, code,
                                kept if making else None)

    def verdict() -> Path | None:
        problem = run()
        if problem:
            where = "in the grading sandbox" if sandboxed else "where learners' notebooks run"
            raise SetupError(f"stopped before grading anyone: the solution of {assignment} does not score full "
                             f"marks {where}: {problem}")
        passed.parent.mkdir(parents=True, exist_ok=True)
        passed.touch()
        return warm_cache(course, assignment) if making else code
    return Check(not making, code, verdict)


def _passed(course: Course, assignment: str, key: str) -> Path:
    """The file that says the solution of ``assignment`` passed with this key."""
    return cache_root() / PASSED / f"{assignment}-{key[:32]}"


def verdict_key(course: Course, assignment: str, *, sandboxed: bool, masked: list[Path], timeout: int,
                forked: bool, code: tuple[Path, ...] | None = None) -> str:
    """A digest of everything a preflight's verdict depends on (the module's docstring lists it);
    ``code``: the course code's folders (default: the packages ``grader`` and ``tensorcraft``)."""
    config = course.root / "nbgrader_config.py"
    parts = {
        "notebook": _digest(course.source(assignment).parent, [course.source(assignment)]),
        "config": _digest(course.root, [config] if config.exists() else []),
        "code": [_digest(folder, sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts))
                 for folder in (code if code is not None else _course_code())],
        "sandbox": Sandbox(Path(tempfile.gettempdir()) / "scratch", masked=list(masked),   # (any uid of its own
                           uid=FIRST_UID if os.getuid() == 0 else None).settings() if sandboxed else None,  # as root)
        "forked": forked, "timeout": timeout,
        "python": [sys.executable, sys.version],
        "packages": _installed(),
        "compilers": [tool(name) for name in COMPILERS],
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _installed() -> list[str]:
    """The installed distributions, by the names of their metadata folders in the site-packages
    folders and PYTHONPATH (``torch-2.13.0.dist-info``: name and version); read from the folders'
    names, not by parsing each one's METADATA (0.1 CPU s for some 170). Not the rest of ``sys.path``,
    whose first entry is the folder a command was started from."""
    folders = [*site.getsitepackages(), site.getusersitepackages(),
               *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    return sorted(f"{folder}/{found.name}" for folder in dict.fromkeys(folders) if folder and os.path.isdir(folder)
                  for found in Path(folder).iterdir() if found.name.endswith((".dist-info", ".egg-info")))


def _course_code() -> tuple[Path, ...]:
    import grader
    import tensorcraft
    return Path(grader.__file__).resolve().parent, Path(tensorcraft.__file__).resolve().parent


def _digest(folder: Path, files: list[Path]) -> str:
    """One digest of the files' names (within ``folder``: a copy of the course elsewhere is the same
    course) and contents, in the order given."""
    digest = hashlib.sha256()
    for file in files:
        digest.update(str(file.relative_to(folder)).encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()


def _solution_here(course: Course, assignment: str, sandboxed: bool, masked: list[Path], timeout: int,
                   cache: Path | None, keep_as: Path | None) -> str | None:
    """The solution run in this process's own sandbox (a fresh kernel), or unconfined."""
    work = Path(tempfile.mkdtemp(prefix="tensorcraft-preflight-"))
    work.chmod(0o711)
    sandbox = Sandbox(work / "scratch", masked=list(masked), uid=claim_uid()) if sandboxed else None
    try:
        notebook, executor = run_solution(course, assignment, sandbox, timeout, cache=cache, folder=work)
        problem = problem_of(notebook, executor)
        if problem is None and keep_as is not None:
            keep(sandbox, keep_as, assignment)
        return problem
    finally:
        shutil.rmtree(work, ignore_errors=True)
