"""nbgrader's own ``autograde`` (the command, and formgrader's Autograde button) runs each learner's
notebook in our sandbox: the course's ``nbgrader_config.py`` names :class:`SandboxedExecute` in
place of nbgrader's ``Execute``.

``python -m grader autograde`` makes its sandboxes itself (one per worker, with a fork server) and
puts its own executor in that place; nbgrader's command runs in one process and calls this
preprocessor once per submission, so here each notebook gets a sandbox of its own (kernel started
anew by ``grader.worker.provisioner``, as ``TENSORCRAFT_FORK_KERNELS=off`` does), masking the course directory, the kept compiled-code
caches and the exchange. Where no sandbox can be made it refuses, as ``autograde`` does, unless the
course config says ``c.SandboxedExecute.unsafe = True``.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from traitlets import Bool

from ..course import Course
from .compile_cache import masked_paths, warm_cache
from .execute import GuardedExecute, prefill
from .sandbox import NoSandboxError, Sandbox, claim_uid, unavailable


class SandboxedExecute(GuardedExecute):
    """nbgrader's Execute, run in a sandbox of its own for each notebook (see the module's docstring)."""

    unsafe = Bool(False, help="Run learners' code with the grader's own rights where no sandbox can be made "
                              "(trusted submissions only).").tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        resources = resources if resources is not None else {}
        if self.sandbox is not None:          # given one already
            return super().preprocess(nb, resources, km)
        reason = unavailable()
        if reason:
            if self.unsafe:
                return super().preprocess(nb, resources, km)
            raise NoSandboxError(f"refusing to run learners' code without a sandbox: {reason} "
                                 "(or set c.SandboxedExecute.unsafe = True for trusted submissions)")
        grading = resources.get("nbgrader", {})
        course = Course(Path(grading["db_url"].removeprefix("sqlite:///")).parent)
        assignment = grading.get("assignment")
        self.assignment = self.assignment or assignment
        folder = Path(tempfile.mkdtemp(prefix="tensorcraft-sandbox-"))
        folder.chmod(0o711)
        self.sandbox = Sandbox(folder / "scratch", masked=masked_paths(course), uid=claim_uid())
        try:
            self.sandbox.end()
            self.sandbox.prepare()
            if assignment and course.source(assignment).exists():
                prefill(warm_cache(course, assignment), self.sandbox)
            resources.setdefault("metadata", {})["path"] = str(self.sandbox.scratch)
            return super().preprocess(nb, resources, km)
        finally:
            self.sandbox.end()
            self.sandbox = None
            shutil.rmtree(folder, ignore_errors=True)
