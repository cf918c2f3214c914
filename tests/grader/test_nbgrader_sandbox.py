"""`nbgrader autograde` (and so formgrader's Autograde button, which runs the same converter) runs
learners' code in our sandbox: the course config names SandboxedExecute as its executor."""
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from grader.course import REPO, Course, put_python_scripts_on_path
from grader.worker.sandbox import unavailable

_spec = importlib.util.spec_from_file_location("fake_class", Path(__file__).with_name("fake_class.py"))
fake_class = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fake_class)

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=f"no sandbox here: {unavailable()}")

LOOKS = '''import os
for _path in {paths!r}:
    print("sees" if os.path.exists(_path) else "cannot see", _path)
print("cwd", os.getcwd())


def outer(a, b):
    return a[:, None] * b[None, :]
'''


def test_nbgrader_autograde_runs_each_notebook_in_the_sandbox(built_course, tmp_path):
    course = Course(tmp_path / "course")
    shutil.copytree(built_course[0].root, course.root)
    secrets = [str(course.gradebook), str(course.root / "source"), str(REPO / "solutions"), str(tmp_path)]
    notebook = fake_class.submission(None, fake_class.CORRECT_ROWS)
    for cell in notebook.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "outer":
            cell.source = LOOKS.format(paths=secrets)
    target = course.submitted("looker", "00_welcome")
    target.parent.mkdir(parents=True)
    nbformat.write(notebook, target)
    put_python_scripts_on_path()
    result = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", "00_welcome", "--log-level=WARN"],
                            cwd=course.root, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    graded = nbformat.read(course.autograded("looker", "00_welcome"), as_version=4)
    printed = "".join(o.get("text", "") for c in graded.cells for o in c.get("outputs", []))
    assert [line for line in printed.splitlines() if line.startswith("sees")] == []
    assert printed.count("cannot see") == len(secrets)
    cwd = next(line for line in printed.splitlines() if line.startswith("cwd ")).split(" ", 1)[1]
    assert not cwd.startswith(str(course.root)), "the kernel ran in the course directory, unconfined"
    with Gradebook(course.db_url) as gradebook:
        scores = {g.name: g.score for g in gradebook.find_submission_notebook("00_welcome", "00_welcome", "looker").grades}
    assert scores == fake_class.POINTS          # the checks ran, in the sandbox, and passed


def test_nbgrader_autograde_refuses_where_no_sandbox_can_be_made(built_course, tmp_path, monkeypatch):
    from grader.worker import nbgrader_sandbox
    monkeypatch.setattr(nbgrader_sandbox, "unavailable", lambda: "bwrap not found")
    executor = nbgrader_sandbox.SandboxedExecute()
    resources = {"nbgrader": {"db_url": built_course[0].db_url, "assignment": "00_welcome"}}
    with pytest.raises(nbgrader_sandbox.NoSandboxError, match="bwrap not found.*SandboxedExecute.unsafe"):
        executor.preprocess(nbformat.v4.new_notebook(), resources)
