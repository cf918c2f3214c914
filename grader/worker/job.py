"""One learner's notebook to grade, as one value: what ``autograde`` hands a worker.

``autograde`` builds a :class:`GradingJob` per submission (:meth:`GradingJob.of`) and submits
``execute_submission(job)`` to its pool; the local process pool and ``grader.instructor.dask_pool.DaskPool`` run
it the same way. The job is frozen and picklable; the Dask path moves it to a worker's copy of the
course with :meth:`GradingJob.moved`, which knows which of its fields are course paths.
:func:`nbgrader_resources` is the one place nbgrader's ``resources`` dict is made.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

SQLITE = "sqlite:///"


@dataclass(frozen=True)
class GradingJob:
    """What grading one submission needs (runs in the worker: ``execute.execute_submission``)."""
    submitted: Path                         # the learner's notebook, in the course's submitted/
    autograded_dir: Path                    # where nbgrader's autograded copy goes
    db_url: str                             # the gradebook (read only by the worker)
    learner: str
    assignment: str
    timeout: int | None = None              # seconds a cell may run (None: the course config's)
    config_file: Path | None = None         # the course's nbgrader_config.py (None: nbgrader's defaults)
    sandboxed: bool = False                 # the kernel runs in a sandbox (``grader.worker.sandbox``)
    masked: tuple[Path, ...] = ()           # what that sandbox never shows
    compile_cache: Path | None = None       # the compiled code the sandbox starts with (``compile_cache``)
    preload: tuple[str, ...] = ()           # what the worker's fork server imports for the batch (``fork_client.preload_for``)

    @classmethod
    def of(cls, course, learner: str, assignment: str, **settings) -> GradingJob:
        """The job of ``learner``'s submission of ``assignment`` in ``course`` (a ``grader.course.Course``)."""
        return cls(course.submitted(learner, assignment), course.autograded(learner, assignment).parent,
                   course.db_url, learner, assignment, config_file=course.root / "nbgrader_config.py", **settings)

    @property
    def gradebook(self) -> Path:
        return Path(self.db_url.removeprefix(SQLITE))

    def resources(self, path: Path | None = None) -> dict:
        """nbgrader's ``resources`` for this job (``path``: the kernel's working folder)."""
        return nbgrader_resources(self.learner, self.assignment, self.db_url, path)

    def moved(self, where: Callable[[Path], Path]) -> GradingJob:
        """The same job with each course path (the notebook, the autograded folder, the gradebook, the
        config, the compiled-code cache) mapped by ``where``: to and from a Dask worker's copy of the course."""
        paths = {name: where(value) for name in ("submitted", "autograded_dir", "config_file", "compile_cache")
                 if (value := getattr(self, name)) is not None}
        return replace(self, db_url=f"{SQLITE}{where(self.gradebook)}", **paths)


def nbgrader_resources(learner: str, assignment: str, db_url: str, path: Path | None = None) -> dict:
    """The ``resources`` nbgrader's preprocessors read (its ``autograde`` makes the same): who, which
    assignment (one notebook, named after it), the gradebook; and, with ``path``, the kernel's folder."""
    resources: dict = {"nbgrader": {"student": learner, "assignment": assignment, "notebook": assignment,
                                    "db_url": db_url}}
    if path is not None:
        resources["metadata"] = {"path": str(path)}
    return resources
