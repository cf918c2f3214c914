"""The course's modules as the notebooks themselves describe them: title, goals, time, exercises.

Read from each notebook's opening markdown (the notebook standard: a ``# NN · Title`` heading,
the learning goals as a bullet list, ``**Time:** ...``, ``**Builds on:** ...``) and from its graded
cells (the ``check_<name>(...)`` calls), so that the course home can never drift from the notebooks.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbgrader.utils import is_grade

NOTEBOOK_NAME = re.compile(r"^\d\d_\w+$")          # 00_welcome, 03_einsum_loops: the assignments
CHECK_CALL = re.compile(r"\bcheck_(\w+)\(")
TITLE = re.compile(r"^#\s+(.+?)\s*$", re.MULTILINE)
BULLET = re.compile(r"^\s*[-*]\s+(.*)$")
FIELD = r"\*\*{}:?\*\*:?\s*(.+?)(?=\s*\*\*|\n\s*\n|$)"


@dataclass(frozen=True)
class Module:
    name: str                    # the notebook's stem, e.g. "03_einsum_loops"
    title: str                   # "03 · Einsum as loops"
    goals: list[str] = field(default_factory=list)
    time: str = ""               # "about 45 minutes"
    builds_on: str = ""
    exercises: list[str] = field(default_factory=list)  # check names of its graded cells, in order

    @property
    def checks_module(self) -> str:
        """The module holding its checks: 03_einsum_loops -> nb03_einsum_loops."""
        return f"nb{self.name}"

    def exercise_id(self, exercise: str) -> str:
        """The id an :class:`~grader.checks.exercise.Exercise` of this notebook carries."""
        return f"{self.checks_module}.{exercise}"


def _introduction(notebook: nbformat.NotebookNode) -> str:
    """The markdown before the first code cell."""
    parts = []
    for cell in notebook.cells:
        if cell.cell_type == "code":
            break
        if cell.cell_type == "markdown":
            parts.append(cell.source)
    return "\n\n".join(parts)


def _field(text: str, label: str) -> str:
    found = re.search(FIELD.format(re.escape(label)), text, re.IGNORECASE | re.DOTALL)
    return " ".join(found.group(1).split()).rstrip(".") if found else ""


def _goals(text: str) -> list[str]:
    """The first bullet list of the introduction, a wrapped bullet joined into one line."""
    goals: list[str] = []
    for line in text.splitlines():
        bullet = BULLET.match(line)
        if bullet:
            goals.append(bullet.group(1).strip())
        elif goals and line.startswith("  ") and line.strip():
            goals[-1] += " " + line.strip()
        elif goals:
            break
    return goals


def graded_exercises(notebook: nbformat.NotebookNode) -> list[str]:
    """The exercises its graded cells check, in the order they appear."""
    names: list[str] = []
    for cell in notebook.cells:
        if cell.cell_type == "code" and is_grade(cell):
            for name in CHECK_CALL.findall(cell.source):
                if name not in names:
                    names.append(name)
    return names


def read_module(name: str, notebook: nbformat.NotebookNode) -> Module:
    text = _introduction(notebook)
    title = TITLE.search(text)
    return Module(name=name, title=title.group(1) if title else name, goals=_goals(text),
                  time=_field(text, "Time"), builds_on=_field(text, "Builds on"),
                  exercises=graded_exercises(notebook))


def modules_in(folder: Path) -> list[Module]:
    """Every assignment notebook (``NN_name.ipynb``) in ``folder``, in course order."""
    return [read_module(path.stem, nbformat.read(path, as_version=4))
            for path in sorted(folder.glob("*.ipynb")) if NOTEBOOK_NAME.match(path.stem)]
