"""Where the course's files live: solutions, learner notebooks, and the nbgrader course directory.

The course directory follows nbgrader's layout (source/, release/, submitted/, autograded/,
feedback/, gradebook.db) so that nbgrader's own commands work on it; it is a build output,
git-ignored, created by `python -m grader build`.
"""
from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONFIG_TEMPLATE = Path(__file__).resolve().with_name("nbgrader_config.py")


@dataclass(frozen=True)
class Course:
    """The paths of one course directory; an assignment is one notebook, named by its stem."""
    root: Path

    @property
    def gradebook(self) -> Path:
        return self.root / "gradebook.db"

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.gradebook}"

    def source(self, assignment: str) -> Path:
        return self.root / "source" / assignment / f"{assignment}.ipynb"

    def release(self, assignment: str) -> Path:
        return self.root / "release" / assignment / f"{assignment}.ipynb"

    def submitted(self, learner: str, assignment: str) -> Path:
        return self.root / "submitted" / learner / assignment / f"{assignment}.ipynb"

    def autograded(self, learner: str, assignment: str) -> Path:
        return self.root / "autograded" / learner / assignment / f"{assignment}.ipynb"

    def feedback(self, learner: str, assignment: str) -> Path:
        return self.root / "feedback" / learner / assignment / f"{assignment}.html"

    def assignments(self) -> list[str]:
        """The assignments built into this course directory, in name order."""
        return sorted(p.name for p in (self.root / "source").glob("*") if self.source(p.name).exists())

    def prepare(self) -> None:
        """Create the directory and (re)write its nbgrader_config.py from grader/nbgrader_config.py."""
        self.root.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(CONFIG_TEMPLATE, self.root / "nbgrader_config.py")


DEFAULT_COURSE = Course(REPO / "build" / "course")
SOLUTIONS = REPO / "solutions"
NOTEBOOKS = REPO / "notebooks"


def put_python_scripts_on_path() -> None:
    """nbgrader runs the `alembic` script by name when it opens a gradebook: make the scripts
    installed beside this Python (the venv's bin/) findable even when the venv is not activated."""
    scripts = str(Path(sys.executable).parent)
    if scripts not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = scripts + os.pathsep + os.environ.get("PATH", "")
