"""Right answers for the checks' tests: the solution notebook's own cell, the one copy of each answer.

``solution("09_fusion_memory", "my_plan_memory")`` runs the notebook's imports cell and its solution
cells, in order (nothing else: no demo, no check; a later answer may call an earlier one), and returns
the function, a learner's right answer as the notebook states it."""
from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any, Callable

SOLUTIONS = Path(__file__).resolve().parents[2] / "solutions"
CELL = re.compile(r"^# %%.*$", re.M)


@functools.cache
def _cells(assignment: str) -> tuple[tuple[str, str], ...]:
    """(header line, source) of every cell of solutions/<assignment>.py."""
    text = (SOLUTIONS / f"{assignment}.py").read_text()
    heads = list(CELL.finditer(text))
    return tuple((m.group(0), text[m.end():heads[i + 1].start() if i + 1 < len(heads) else len(text)])
                 for i, m in enumerate(heads))


def solution(assignment: str, name: str) -> Callable[..., Any]:
    """The function ``name`` as the solution cell of ``assignment`` defines it, in a namespace of its own."""
    cells = _cells(assignment)
    imports = [source for head, source in cells if '"grade_id": "imports"' in head]
    defining = [source for head, source in cells if '"solution": true' in head
                and re.search(rf"^def {re.escape(name)}\(", source, re.M)]
    if len(defining) != 1:
        raise LookupError(f"solutions/{assignment}.py: {len(defining)} solution cells define {name}")
    answers = [source for head, source in cells if '"solution": true' in head]
    namespace: dict[str, Any] = {"__name__": f"solution_{assignment}"}
    for source in imports + answers:
        exec(compile(source, f"solutions/{assignment}.py", "exec"), namespace)
    return namespace[name]
