"""`python -m grader autograde SUBMISSIONS --dask ADDRESS`: the notebook executions on a Dask cluster.

``DaskPool`` stands where autograde's local process pool stands: autograde hands it the same calls
(``execute_submission`` and its ``job.GradingJob``) and gets back the same ``Executed`` values, so that the
parent still registers the submissions, saves every score, writes the CSV and the feedback, and a
run killed half-way resumes as a local one does. What changes is where a notebook runs: on a Dask
worker, possibly on another machine that shares no folder with the instructor's.

So each call carries what it needs. Once per run, a *kit* travels to every worker: a copy of the
course directory's grading inputs (the gradebook reduced to the assignments' cells, with no
learner in it; the release; nbgrader_config.py; the compiled-kernel caches the sandboxes start with) and the course's code (``grader/``, whose checks
the hidden tests call, and ``tensorcraft``), which the kernel imports first. Each call adds its
learner's submitted folder (the notebook and the exchange's files beside it). The job's course
paths (``GradingJob.moved``) are sent relative to the course directory and re-rooted on the worker.

On the worker, notebooks run in a child process (``python -m grader.dask_grading``), as they run in
a pool process locally, so that a notebook that kills the process running it (its kernel's parent)
kills only that child: the child is replaced, and the submission is scored 0 in every cell, with
the reason in its feedback, not lost. A worker that dies for any reason (a machine lost, memory)
is replaced by its nanny, and Dask runs its calls again elsewhere. Workers need the same Python environment as the instructor (checked when
connecting) and should run one thread each (``dask worker ADDRESS --nthreads 1 --nworkers N``):
the calls of one worker run one at a time.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import zipfile
from concurrent.futures import Executor, Future
from importlib import metadata
from multiprocessing.connection import Connection
from pathlib import Path

import nbformat

from .course import Course
from .job import GradingJob
from .kernel_cache import FOLDER as KERNELS  # the kit's copies of the kept kernel caches, in its course folder
from .kernel_cache import cache_path, cache_root

# what a worker must have in the very versions the instructor has, for a grade to mean the same
SAME_VERSIONS = ("nbgrader", "nbclient", "nbformat", "ipykernel", "torch", "numpy", "einops", "distributed")


# ---------------------------------------------------------------- the kit (parent side)

def _learnerless_gradebook(course: Course, target: Path) -> None:
    """The gradebook as it stands after the build: assignments and their cells, no learner."""
    from nbgrader.api import Gradebook
    with sqlite3.connect(course.gradebook) as source, sqlite3.connect(target) as copy:
        source.backup(copy)
    with Gradebook(f"sqlite:///{target}") as gradebook:
        for student in list(gradebook.students):
            gradebook.remove_student(student.id)
    with sqlite3.connect(target) as copy:
        copy.execute("VACUUM")


def _code_roots() -> list[Path]:
    """The packages a notebook's kernel imports from the course: the grader (its checks) and the library."""
    import tensorcraft

    from . import __file__ as grader_init
    return [Path(grader_init).parent, Path(tensorcraft.__file__).parent]


def build_kit(course: Course) -> bytes:
    """A zip of what every execution of this course needs, whatever the learner."""
    buffer = io.BytesIO()
    with tempfile.TemporaryDirectory() as scratch, zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as kit:
        gradebook = Path(scratch) / "gradebook.db"
        _learnerless_gradebook(course, gradebook)
        kit.write(gradebook, "course/gradebook.db")
        kit.write(course.root / "nbgrader_config.py", "course/nbgrader_config.py")
        for path in sorted((course.root / "release").rglob("*")):
            if path.is_file():
                kit.write(path, f"course/{path.relative_to(course.root).as_posix()}")
        for kept in (cache_path(course, a) for a in course.assignments()):    # what every sandbox starts with
            for path in sorted(kept.rglob("*")) if kept.is_dir() else []:
                if path.is_file():
                    kit.write(path, f"course/{KERNELS}/{kept.name}/{path.relative_to(kept).as_posix()}")
        for root in _code_roots():
            for path in sorted(root.rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    kit.write(path, f"code/{root.name}/{path.relative_to(root).as_posix()}")
    return buffer.getvalue()


def _sent(job: GradingJob, course: Course) -> GradingJob:
    """``job`` with its course paths relative to the course directory (a kept kernel cache: to the
    kit's copy of it), to be re-rooted in the kit's course copy on the worker."""
    root = course.root.resolve()

    def relative(path: Path) -> Path:
        if path.parent == cache_root():
            return Path(KERNELS, path.name)
        with contextlib.suppress(ValueError):
            return path.resolve().relative_to(root)
        return path                         # outside the course: sent as it is
    return job.moved(relative)


def _learner_files(job: GradingJob, course: Course) -> dict[str, bytes]:
    """The files of the learner's submitted folder (relative path -> bytes), for a job as sent."""
    folder = course.root / job.submitted.parent
    return {(job.submitted.parent / file.name).as_posix(): file.read_bytes()
            for file in sorted(folder.iterdir()) if file.is_file()} if folder.is_dir() else {}


# ---------------------------------------------------------------- the worker side

_LOCK = threading.Lock()     # one execution at a time per worker process
_KITS = Path(tempfile.gettempdir()) / "tensorcraft-dask-kits"


class ChildDied(RuntimeError):
    """The child process running a notebook ended before answering (its notebook killed it)."""


class _Child:
    """A long-lived `python -m grader.dask_grading` beside the worker that runs the calls it is sent
    (pickled over its stdin and stdout, through ``multiprocessing.connection``). A subprocess, not
    multiprocessing: Dask's workers are daemonic, and those may not have children."""

    def __init__(self):
        self.process = subprocess.Popen([sys.executable, "-m", "grader.dask_grading"],
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


def _serve() -> None:
    """The child's loop. Its stdout is the reply channel, so everything else it (or a kernel it
    starts) prints goes to stderr."""
    replies = Connection(os.dup(1), readable=False)
    os.dup2(2, 1)
    calls = Connection(os.dup(0), writable=False)
    while True:
        try:
            env, fn, args, kwargs = calls.recv()
        except EOFError:
            return
        os.environ.update(env)      # the kernels this child starts inherit it
        try:
            reply = (True, fn(*args, **kwargs))
        except Exception as error:
            reply = (False, error)
        replies.send(reply)


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
    from . import pipeline
    from .execute import Executed, GuardedExecute, _error_output
    try:
        notebook = nbformat.read(job.submitted, as_version=4)
        chains = pipeline.build_chains(pipeline.course_config(job.config_file), GuardedExecute)
        notebook, _ = pipeline.run(chains.sanitize, notebook, job.resources())   # as grading would have
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


def _identity(value):
    return value


def _versions() -> dict[str, str]:
    found = {"python": ".".join(map(str, sys.version_info[:2]))}
    for name in SAME_VERSIONS:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "missing"
    return found


# ---------------------------------------------------------------- the pool (parent side)

class DaskPool(Executor):
    """A concurrent.futures Executor that runs autograde's executions on a Dask cluster."""

    def __init__(self, address, course: Course, *, timeout: float = 10):
        from distributed import Client
        self.course = course
        self.client = address if isinstance(address, Client) else Client(address, timeout=timeout)
        self._owns_client = not isinstance(address, Client)
        self._kit = None
        self._futures: list = []
        self._check_environment()

    def _check_environment(self) -> None:
        here = _versions()
        differ = {worker: {k: v for k, v in found.items() if here.get(k) != v}
                  for worker, found in self.client.run(_versions).items()}
        differ = {worker: d for worker, d in differ.items() if d}
        if differ:
            lines = "; ".join(f"{w}: " + ", ".join(f"{k} {v} (here {here[k]})" for k, v in d.items())
                              for w, d in differ.items())
            raise RuntimeError(f"Dask workers with another environment than this one would grade differently: {lines}")

    def submit(self, fn, /, job: GradingJob) -> Future:
        """Run ``fn(job)`` (``execute.execute_submission``) on a worker; its ``Executed`` comes back here."""
        if self._kit is None:       # built at the first call: after autograde registered the submissions
            # a task that returns the kit, not scattered data: if every worker holding it dies, it is rebuilt
            kit = build_kit(self.course)
            self._kit = self.client.submit(_identity, kit, key=f"tensorcraft-kit-{hashlib.sha256(kit).hexdigest()}")
        job = _sent(job, self.course)
        remote = self.client.submit(run_on_worker, fn, self._kit, _learner_files(job, self.course), job, pure=False)
        local: Future = Future()
        local.set_running_or_notify_cancel()

        def hand_over(done) -> None:
            try:
                local.set_result(done.result())
            except BaseException as error:   # KilledWorker, a cancelled call, a lost scheduler: the caller reports it
                local.set_exception(error)
        remote.add_done_callback(hand_over)
        self._futures.append(remote)
        return local

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """End of an autograde run: cancel what is left if asked (Ctrl-C); close the client if this pool opened it."""
        if cancel_futures:
            self.client.cancel(self._futures)
        self._futures, self._kit = [], None
        if self._owns_client:
            self.client.close()


if __name__ == "__main__":
    _serve()
