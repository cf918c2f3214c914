"""A Dask worker's side of `python -m grader autograde --dask` (:mod:`grader.instructor.dask_pool`).

:func:`run_on_worker` is the task the instructor's ``DaskPool`` submits: it unpacks the course's kit
once per machine, re-roots the job in the kit's course copy, writes the learner's files, and runs
the call in a long-lived child process (:mod:`grader.worker.dask_child`), so that a notebook that
kills the process running it kills only that child: the child is replaced and the submission scored
0 in every cell, with the reason. :func:`versions` is run on every worker when the pool connects.
"""
from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from importlib import metadata
from multiprocessing.connection import Connection
from pathlib import Path

import nbformat

from .job import GradingJob

# what a worker must have in the very versions the instructor has, for a grade to mean the same
SAME_VERSIONS = ("nbgrader", "nbclient", "nbformat", "ipykernel", "torch", "numpy", "einops", "distributed")

CHILD = "grader.worker.dask_child"    # the module the child runs
_LOCK = threading.Lock()     # one execution at a time per worker process
_KITS = Path(tempfile.gettempdir()) / "tensorcraft-dask-kits"


class ChildDied(RuntimeError):
    """The child process running a notebook ended before answering (its notebook killed it)."""


class _Child:
    """A long-lived `python -m grader.worker.dask_child` beside the worker that runs the calls it is sent
    (pickled over its stdin and stdout, through ``multiprocessing.connection``). A subprocess, not
    multiprocessing: Dask's workers are daemonic, and those may not have children."""

    def __init__(self):
        self.process = subprocess.Popen([sys.executable, "-m", CHILD],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.calls = Connection(os.dup(self.process.stdin.fileno()), readable=False)
        self.replies = Connection(os.dup(self.process.stdout.fileno()), writable=False)

    def call(self, env: dict[str, str], fn, args: tuple, kwargs: dict):
        try:
            self.calls.send((env, fn, args, kwargs))
            succeeded, value = self.replies.recv()
        except (OSError, EOFError) as error:
            self.process.kill()
            self.process.wait()
            for end in (self.calls, self.replies):
                end.close()
            raise ChildDied(f"exit status {self.process.returncode}") from error
        if not succeeded:
            raise value
        return value


_CHILD: _Child | None = None


def _unpacked(kit: bytes) -> Path:
    """The kit's folder on this machine, unpacked once (shared by the workers of one machine)."""
    folder = _KITS / hashlib.sha256(kit).hexdigest()[:16]
    if not folder.is_dir():
        _KITS.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(dir=_KITS, prefix=".unpacking-"))
        with zipfile.ZipFile(io.BytesIO(kit)) as archive:
            archive.extractall(partial)
        try:
            os.rename(partial, folder)
        except OSError:                 # another worker of this machine unpacked it first
            shutil.rmtree(partial, ignore_errors=True)
    return folder


def _not_run(job: GradingJob, why: str):
    """The submission as grading would have run it, every code cell scored 0 with ``why``: what a
    notebook that killed the process running it gets (its outputs died with that process)."""
    from . import chains
    from .execute import Executed, GuardedExecute, _error_output
    try:
        notebook = nbformat.read(job.submitted, as_version=4)
        steps = chains.build_chains(chains.course_config(job.config_file), GuardedExecute)
        notebook, _ = chains.run(steps.sanitize, notebook, job.resources())   # as grading would have
    except Exception as error:
        return Executed(job.learner, job.assignment,
                        problem=f"{why}, and could not be scored: {type(error).__name__}: {error}")
    for cell in notebook.cells:
        if cell.cell_type == "code" and cell.source.strip():
            cell.outputs = [_error_output("CellNotRun", f"this cell did not run: {why}")]
    return Executed(job.learner, job.assignment, nbformat.writes(notebook), notes=[why])


def run_on_worker(fn, kit: bytes, files: dict[str, bytes], job: GradingJob):
    """A Dask task: re-root the job in the kit's course copy, write the learner's files, run
    ``fn(job)`` in this worker's child process, clean up; a dead child is replaced and the
    submission scored 0."""
    global _CHILD
    with _LOCK:
        kit_root = _unpacked(kit)
        course_root = kit_root / "course"
        job = job.moved(lambda path: course_root / path)     # an absolute path stays as it is
        written = []
        for relative, data in files.items():
            path = course_root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            written.append(path)
        code = str(kit_root / "code")
        env = {"PYTHONPATH": os.pathsep.join([code, *filter(None, [os.environ.get("PYTHONPATH")])])}
        try:
            if _CHILD is None:
                _CHILD = _Child()
            return _CHILD.call(env, fn, (job,), {})
        except ChildDied:
            _CHILD = None
            return _not_run(job, "the notebook killed the process that ran it")
        finally:
            for path in written:
                path.unlink(missing_ok=True)
            for path in {p.parent for p in written}:
                for leftover in (path, course_root / "autograded" / path.relative_to(course_root / "submitted")):
                    shutil.rmtree(leftover, ignore_errors=True)


def versions() -> dict[str, str]:
    found = {"python": ".".join(map(str, sys.version_info[:2]))}
    for name in SAME_VERSIONS:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "missing"
    return found
