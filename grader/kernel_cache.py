"""Compiled kernels a sandboxed notebook finds ready, so that its first ``torch.compile`` is not cold.

A sandbox starts with an empty scratch folder, so every learner's kernel would compile
torch.compile's (inductor's) and tensorcraft's C kernels from nothing: 20 s or more for a small
model on two busy cores, past a cell's time limit, for no fault of the learner's. Before a batch,
:func:`warm_cache` runs the assignment's solution notebook (the course's own, trusted code) once, in
a sandbox, and keeps what it compiled (the scratch's ``.cache``) in the course directory. Each
learner's sandbox then starts with a copy of it (:func:`seed`): the copy is the learner's own, so
what one notebook writes to its cache reaches no other learner and not the kept one.

A notebook that compiles nothing leaves nothing to keep; the run is then remembered as empty and
not repeated. The kept cache is named by a hash of the solution notebook and torch's version:
a rebuilt assignment or another torch gets a fresh one.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import nbformat

from .course import Course
from .sandbox import CACHE, Sandbox, claim_uid

FOLDER = "kernel-cache"     # under the course directory, which no sandbox can see
WARM_UP_TIMEOUT = 600       # seconds a cell of the solution may take while it compiles from nothing


def cache_path(course: Course, assignment: str) -> Path:
    import torch
    digest = hashlib.sha256(course.source(assignment).read_bytes() + torch.__version__.encode()).hexdigest()
    return course.root / FOLDER / f"{assignment}-{digest[:16]}"


def warm_cache(course: Course, assignment: str) -> Path | None:
    """The kept cache of ``assignment``, made now by running its solution in a sandbox when there is
    none yet; None when the solution compiled nothing (or could not run: grading goes on, cold)."""
    kept = cache_path(course, assignment)
    if not kept.exists():
        _make(course, assignment, kept)
    return kept if kept.is_dir() and any(kept.iterdir()) else None


def seed(cache: Path | None, sandbox: Sandbox) -> None:
    """Give ``sandbox`` a copy of ``cache`` as its own compiled-kernel cache, owned by its uid."""
    if cache is None or not cache.is_dir():
        return
    target = sandbox.scratch / CACHE
    shutil.copytree(cache, target, symlinks=True, dirs_exist_ok=True)
    if sandbox.uid is not None:
        for folder, names, files in os.walk(target):
            for name in (folder, *(os.path.join(folder, n) for n in names + files)):
                os.lchown(name, sandbox.uid, sandbox.uid)


def _make(course: Course, assignment: str, kept: Path) -> None:
    from .execute import GuardedExecute

    work = Path(tempfile.mkdtemp(prefix="tensorcraft-warm-"))
    work.chmod(0o711)
    sandbox = Sandbox(work / "scratch", hidden=[course.root.resolve()], uid=claim_uid())
    previous = os.environ.get("NBGRADER_EXECUTION")
    try:
        sandbox.end()
        sandbox.prepare()
        notebook = nbformat.read(course.source(assignment), as_version=4)
        os.environ["NBGRADER_EXECUTION"] = "autograde"      # what grading runs, not the slower demos
        GuardedExecute(sandbox=sandbox, timeout=WARM_UP_TIMEOUT).preprocess(
            notebook, {"metadata": {"path": str(sandbox.scratch)}})
        sandbox.end()
        for stale in kept.parent.glob(f"{assignment}-*"):
            shutil.rmtree(stale, ignore_errors=True)
        kept.parent.mkdir(parents=True, exist_ok=True)
        made = sandbox.scratch / CACHE
        staging = Path(tempfile.mkdtemp(prefix=f".{assignment}-", dir=kept.parent))
        if made.is_dir():
            shutil.copytree(made, staging, symlinks=True, dirs_exist_ok=True)
        try:
            os.replace(staging, kept)        # whole or not at all; a run killed here leaves no half cache
        except OSError:                      # another run kept one first
            shutil.rmtree(staging, ignore_errors=True)
    finally:
        if previous is None:
            os.environ.pop("NBGRADER_EXECUTION", None)
        else:
            os.environ["NBGRADER_EXECUTION"] = previous
        sandbox.end()
        shutil.rmtree(work, ignore_errors=True)
