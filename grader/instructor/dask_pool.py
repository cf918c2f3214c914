"""`python -m grader autograde SUBMISSIONS --dask ADDRESS`: the notebook executions on a Dask cluster.

``DaskPool`` stands where autograde's local process pool stands: autograde hands it the same calls
(``execute_submission`` and its ``job.GradingJob``) and gets back the same ``Executed`` values, so that the
parent still registers the submissions, saves every score, writes the CSV and the feedback, and a
run killed half-way resumes as a local one does. What changes is where a notebook runs: on a Dask
worker, possibly on another machine that shares no folder with the instructor's.

So each call carries what it needs. Once per run, a *kit* travels to every worker: a copy of the
course directory's grading inputs (the gradebook reduced to the assignments' cells, with no
learner in it; the release; nbgrader_config.py; the compiled-code caches the sandboxes start with) and the course's code (``grader/``, whose checks
the hidden tests call, and ``tensorcraft``), which the kernel imports first. Each call adds its
learner's submitted folder (the notebook and the exchange's files beside it). The job's course
paths (``GradingJob.moved``) are sent relative to the course directory and re-rooted on the worker.

On the worker (:mod:`grader.worker.dask_worker`), notebooks run in a child process
(:mod:`grader.worker.dask_child`), as they run in
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
import sqlite3
import tempfile
import zipfile
from concurrent.futures import Executor, Future
from pathlib import Path

from ..course import Course
from ..worker.dask_worker import run_on_worker, versions
from ..worker.job import GradingJob
from ..worker.compile_cache import FOLDER as COMPILED  # the kit's copies of the kept compiled-code caches, in its course folder
from ..worker.compile_cache import cache_path, cache_root

# ---------------------------------------------------------------- the kit


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
                    kit.write(path, f"course/{COMPILED}/{kept.name}/{path.relative_to(kept).as_posix()}")
        for root in _code_roots():
            for path in sorted(root.rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    kit.write(path, f"code/{root.name}/{path.relative_to(root).as_posix()}")
    return buffer.getvalue()


def _sent(job: GradingJob, course: Course) -> GradingJob:
    """``job`` with its course paths relative to the course directory (a kept compiled-code cache: to
    the kit's copy of it), to be re-rooted in the kit's course copy on the worker."""
    root = course.root.resolve()

    def relative(path: Path) -> Path:
        if path.parent == cache_root():
            return Path(COMPILED, path.name)
        with contextlib.suppress(ValueError):
            return path.resolve().relative_to(root)
        return path                         # outside the course: sent as it is
    return job.moved(relative)


def _learner_files(job: GradingJob, course: Course) -> dict[str, bytes]:
    """The files of the learner's submitted folder (relative path -> bytes), for a job as sent."""
    folder = course.root / job.submitted.parent
    return {(job.submitted.parent / file.name).as_posix(): file.read_bytes()
            for file in sorted(folder.iterdir()) if file.is_file()} if folder.is_dir() else {}


def _identity(value):
    return value


# ---------------------------------------------------------------- the pool

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
        here = versions()
        differ = {worker: {k: v for k, v in found.items() if here.get(k) != v}
                  for worker, found in self.client.run(versions).items()}
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

