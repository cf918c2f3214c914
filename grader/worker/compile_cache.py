"""Compiled code a sandboxed notebook finds ready, so that its first ``torch.compile`` is not cold.

A sandbox starts with an empty scratch folder, so every learner's kernel would compile
torch.compile's (inductor's) and tensorcraft's C code from nothing: 20 s or more for a small
model on two busy cores, past a cell's time limit, for no fault of the learner's. Before a batch,
:func:`warm_cache` runs the assignment's solution notebook (the course's own, trusted code) once, in
a sandbox, and keeps what it compiled (the scratch's ``.cache``) in the course directory. Each
learner's sandbox then starts with a copy of it (:func:`grader.worker.execute.prefill`): the copy is the learner's own, so
what one notebook writes to its cache reaches no other learner and not the kept one.

The kept caches live in tensorcraft's cache folder (``$TENSORCRAFT_CACHE_DIR``, else
``~/.cache/tensorcraft``, as for the C backend), under ``grading-compiled/``, named by a hash of the
solution notebook and of what the compiled code's keys depend on (:func:`compile_environment`: torch's
version and folder, Python, the compilers, the processor, the sandbox's compile settings): one run serves every course directory built
from the same notebook (a rebuild, a copy), and a changed notebook, installation or setting gets a fresh one; the cache of
another version of the same notebook is deleted once it has gone unused for a month. Only the
grader writes there; no sandbox sees it. A notebook that calls no compiler is not run (it would
keep nothing worth its time).
"""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from ..course import Course
from .chains import course_config, exchange_root
from .execute import GuardedExecute, prefill
from .sandbox import CACHE, COMPILE_SETTINGS, Sandbox, claim_uid

FOLDER = "grading-compiled"  # under tensorcraft's cache folder
COMPILERS = ("cc", "gcc", "c++", "g++")     # tensorcraft's C backend and Inductor's C++
WARM_UP_TIMEOUT = 600       # seconds a cell of the solution may take while it compiles from nothing
STALE_AFTER = 30 * 24 * 3600  # seconds unused after which the cache of another version of a notebook goes


def cache_root() -> Path:
    """Where kept caches live (the C backend's convention: ``tensorcraft.compiler.codegen.c_toolchain``)."""
    return Path(os.environ.get("TENSORCRAFT_CACHE_DIR") or Path.home() / ".cache" / "tensorcraft") / FOLDER


def cache_path(course: Course, assignment: str) -> Path:
    """Named by the solution and by what decides the compiled code's own keys (:func:`compile_environment`):
    a change of any makes a new cache, never a stale or missing one."""
    digest = hashlib.sha256(course.source(assignment).read_bytes()
                            + json.dumps(compile_environment(), sort_keys=True).encode()).hexdigest()
    return cache_root() / f"{assignment}-{digest[:16]}"


def compile_environment() -> dict[str, object]:
    """What Inductor's and tensorcraft's keys for compiled code depend on besides the code itself:
    torch's version and where it is installed (Inductor's compile command names its include and library
    folders, and Python's: a cache kept by another virtual environment would miss for every learner,
    and each would compile from nothing, measured at 3-5 s a submission of notebook 10), Python, the C
    and C++ compilers, the processor (``-march=native``) and how a sandbox compiles (``COMPILE_SETTINGS``).
    Read without importing torch: the grading parent needs it before its workers start (1.6 s on two cores)."""
    return {"torch": torch_installation(),
            "python": [sys.executable, sys.version], "compilers": [tool(name) for name in COMPILERS],
            "processor": _processor(), "settings": sorted(COMPILE_SETTINGS.items())}


def torch_installation() -> list[str]:
    """torch's version and folder, as the installation says (torch is not imported)."""
    folder = importlib.util.find_spec("torch").submodule_search_locations[0]
    return [importlib.metadata.version("torch"), str(Path(folder).resolve())]


def tool(name: str) -> list[object] | None:
    """Which program ``name`` is on PATH (resolved), its size and time of change; None without one."""
    found = shutil.which(name)
    if found is None:
        return None
    stat = Path(found).resolve().stat()
    return [str(Path(found).resolve()), stat.st_size, stat.st_mtime_ns]


@functools.cache
def _processor() -> str:
    """The processor's model and instruction sets (what ``-march=native`` compiles for), read once."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.machine()
    return "\n".join(dict.fromkeys(line for line in lines if line.startswith(("model name", "flags"))))


def warm_cache(course: Course, assignment: str) -> Path | None:
    """The kept cache of ``assignment``, made now by running its solution in a sandbox when there is
    none yet; None when it calls no compiler, or compiled nothing (grading then goes on, cold)."""
    if not compiles(course.source(assignment)):
        return None
    kept = cache_path(course, assignment)
    if not kept.exists():
        _make(course, assignment, kept)
    if not (kept.is_dir() and any(kept.iterdir())):
        return None
    os.utime(kept)                      # used now
    _delete_stale(kept, assignment)
    return kept


def _delete_stale(kept: Path, assignment: str) -> None:
    """Delete the kept caches of other versions of ``assignment`` unused for ``STALE_AFTER``: every
    edit of a notebook makes a new one, and nothing else would ever delete the old ones."""
    version = re.compile(re.escape(assignment) + r"-[0-9a-f]{16}")
    for other in kept.parent.iterdir():
        if other != kept and version.fullmatch(other.name) and time.time() - other.stat().st_mtime > STALE_AFTER:
            shutil.rmtree(other, ignore_errors=True)


def compiles(notebook: Path) -> bool:
    """Whether the notebook calls a compiler (``torch.compile``, ``tc.compile``): only such a notebook
    has compiled code worth a run of its solution; the others would keep nothing but font caches."""
    return any(cell.cell_type == "code" and "compile(" in cell.source
               for cell in nbformat.read(notebook, as_version=4).cells)


def _make(course: Course, assignment: str, kept: Path) -> None:
    work = Path(tempfile.mkdtemp(prefix="tensorcraft-warm-"))
    work.chmod(0o711)
    sandbox = Sandbox(work / "scratch", masked=masked_paths(course), uid=claim_uid())
    try:
        run_solution(course, assignment, sandbox, WARM_UP_TIMEOUT)
        keep(sandbox, kept, assignment)
    finally:
        sandbox.end()
        shutil.rmtree(work, ignore_errors=True)


def run_solution(course: Course, assignment: str, sandbox: Sandbox | None, timeout: int,
                 cache: Path | None = None, folder: Path | None = None):
    """Execute the assignment's solution as grading runs a learner's notebook (``NBGRADER_EXECUTION``
    set, the grading code verified after each cell) in ``sandbox`` (None: unconfined, in ``folder``),
    which starts with a copy of ``cache``; returns the executed notebook and the executor."""
    previous = os.environ.get("NBGRADER_EXECUTION")
    try:
        if sandbox is not None:
            sandbox.end()
            sandbox.prepare()
            prefill(cache, sandbox)
        notebook = nbformat.read(course.source(assignment), as_version=4)
        os.environ["NBGRADER_EXECUTION"] = "autograde"      # what grading runs, not the slower demos
        executor = GuardedExecute(sandbox=sandbox, timeout=timeout, assignment=assignment)
        notebook, _ = executor.preprocess(
            notebook, {"metadata": {"path": str(sandbox.scratch if sandbox is not None else folder)}})
        return notebook, executor
    finally:
        if previous is None:
            os.environ.pop("NBGRADER_EXECUTION", None)
        else:
            os.environ["NBGRADER_EXECUTION"] = previous
        if sandbox is not None:
            sandbox.end()


def keep(sandbox: Sandbox, kept: Path, assignment: str) -> None:
    """Keep what a run in ``sandbox`` compiled as the cache ``kept``, whole or not at all."""
    kept.parent.mkdir(parents=True, exist_ok=True)
    made = sandbox.scratch / CACHE
    staging = Path(tempfile.mkdtemp(prefix=f".{assignment}-", dir=kept.parent))
    if made.is_dir():
        shutil.copytree(made, staging, symlinks=True, dirs_exist_ok=True)
    try:
        os.replace(staging, kept)        # whole or not at all; a run killed here leaves no half cache
    except OSError:                      # another run kept one first
        shutil.rmtree(staging, ignore_errors=True)


def masked_paths(course: Course) -> list[Path]:
    """What no grading kernel may see even where a readable folder holds it: the course directory, the
    kept compiled-code caches, and nbgrader's exchange (by default under /usr/local, which the sandbox reads)."""
    config = course.root / "nbgrader_config.py"
    return [course.root.resolve(), cache_root(), exchange_root(course_config(config if config.exists() else None))]
