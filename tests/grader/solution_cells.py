"""Right answers for the checks' tests: the solution notebook's own cell, the one copy of each answer.

``solution("09_fusion_memory", "my_plan_memory")`` runs, in the notebook's order, its imports cell, its
solution cells, and the definitions of the other code cells (imports, functions, classes, assignments
that call nothing: a table an answer reads), never a demo or a check; and returns the function, a
learner's right answer as the notebook states it. What an imports cell sets for the whole process
(``os.environ["OMP_NUM_THREADS"]``, torch's number of threads: 11 sets one, 09 two) is put back
afterwards: it would leak into the tests that run after in the same process (a subprocess started
later inherited ``OMP_NUM_THREADS=1``)."""
from __future__ import annotations

import ast
import functools
import os
import re
from pathlib import Path
from typing import Any, Callable
from unittest import mock

import torch

SOLUTIONS = Path(__file__).resolve().parents[2] / "solutions"
CELL = re.compile(r"^# %%.*$", re.M)


@functools.cache
def _cells(assignment: str) -> tuple[tuple[str, str], ...]:
    """(header line, source) of every cell of solutions/<assignment>.py."""
    text = (SOLUTIONS / f"{assignment}.py").read_text()
    heads = list(CELL.finditer(text))
    return tuple((m.group(0), text[m.end():heads[i + 1].start() if i + 1 < len(heads) else len(text)])
                 for i, m in enumerate(heads))


def solution(assignment: str, name: str, edits: tuple[tuple[str, str], ...] = ()) -> Callable[..., Any]:
    """The function ``name`` as the solution cell of ``assignment`` defines it, in a namespace of its own.
    ``edits``: (old, new) replacements in that cell (each old text there exactly once): a learner's
    mistake written into the solution, for a test that the check names it."""
    threads = torch.get_num_threads()
    try:
        with mock.patch.dict(os.environ):
            return _solution(assignment, name, edits)
    finally:
        torch.set_num_threads(threads)


def _solution(assignment: str, name: str, edits: tuple[tuple[str, str], ...]) -> Callable[..., Any]:
    cells = _cells(assignment)
    defining = [source for head, source in cells if '"solution": true' in head
                and re.search(rf"^def {re.escape(name)}\(", source, re.M)]
    if len(defining) != 1:
        raise LookupError(f"solutions/{assignment}.py: {len(defining)} solution cells define {name}")
    if edits:
        mistaken = defining[0]
        for old, new in edits:
            if mistaken.count(old) != 1:
                raise LookupError(f"solutions/{assignment}.py: {old!r} is not in the cell of {name} exactly once")
            mistaken = mistaken.replace(old, new)
        cells = tuple((head, mistaken if source is defining[0] else source) for head, source in cells)
    namespace: dict[str, Any] = {"__name__": f"solution_{assignment}"}
    for head, source in cells:
        if "[markdown]" in head or '"grade": true' in head:
            continue
        if '"grade_id": "imports"' in head or '"solution": true' in head:
            exec(compile(source, f"solutions/{assignment}.py", "exec"), namespace)
            continue
        for statement in ast.parse(source).body:
            if _defines(statement):
                try:   # a definition that reads a demo's result is none an answer needs
                    exec(compile(ast.Module([statement], []), f"solutions/{assignment}.py", "exec"), namespace)
                except (NameError, AttributeError):
                    pass
    return namespace[name]


def _defines(statement: ast.stmt) -> bool:
    """An import, a definition, or an assignment of a value computed without calling anything."""
    if isinstance(statement, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)):
        return True
    return isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is not None and \
        not any(isinstance(n, ast.Call) for n in ast.walk(statement.value))
