"""A class of notebook-00 submissions with known mistakes planted in known numbers, for the class
report (``fake_class`` style): learners whose answer is one of the course's own mutants (its code
taken from grader/mutants), an answer no mutant explains, correct and untouched ones, two copies of
one answer with the variables renamed, one answer pasted from the library, and a time-out."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

import nbformat

from fake_class import CORRECT_OUTER, CORRECT_ROWS, submission
from grader.mutants import mutants_for
from tensorcraft.einstein import loops


def mutant_body(exercise: str, name: str) -> str:
    """The body of mutant ``name`` of ``exercise``, as a learner would type it into the function."""
    wrong = next(m for m in mutants_for(exercise) if m.name == name)
    source = inspect.getsource(wrong.fn)
    body = source[source.index(":\n", source.index("def ")) + 2:]
    return "\n".join(line[4:] if line.startswith("    ") else line for line in body.rstrip().splitlines()).replace(
        "\n", "\n    ")


OUTER_MUTANT, ROWS_MUTANT = "outer_sum", "normalize_columns"

VERBOSE_OUTER = """rows = a.reshape(-1, 1)
    cols = b.reshape(1, -1)
    product = rows * cols
    if product.dim() != 2:
        raise ValueError("the outer product of two vectors is a matrix")
    assert product.shape == (a.shape[0], b.shape[0]), "one row per entry of a"
    return product"""
VERBOSE_ROWS = """totals = x.sum(dim=1, keepdim=True)
    if totals.shape[0] != x.shape[0]:
        raise ValueError("one total per row expected")
    result = x / totals
    assert result.shape == x.shape, "the result keeps the input's shape"
    return result"""


def renamed(body: str) -> str:
    """The same answer with every variable renamed: what a copier does to hide a copy."""
    for old, new in {"rows": "left", "cols": "right", "product": "table", "totals": "sums", "result": "out"}.items():
        body = re.sub(rf"\b{old}\b", new, body)
    return body


def pasted_from_the_library() -> str:
    """A solution cell of outer holding two helpers copied verbatim from tensorcraft.einstein.loops."""
    helpers = inspect.getsource(loops._element_index) + "\n\n" + inspect.getsource(loops._subscript)
    return f"{helpers}\n\ndef outer(a, b):\n    {CORRECT_OUTER}\n"


# learner -> (outer body, normalize_rows body); None: the release's stub
LEARNERS = {
    "m1": (mutant_body("nb00_welcome.outer", OUTER_MUTANT), CORRECT_ROWS),
    "m2": (mutant_body("nb00_welcome.outer", OUTER_MUTANT), CORRECT_ROWS),
    "m3": (mutant_body("nb00_welcome.outer", OUTER_MUTANT), CORRECT_ROWS),
    "n1": (None, mutant_body("nb00_welcome.normalize_rows", ROWS_MUTANT)),
    "odd": ("return a[:, None] * b[None, :] + 1", CORRECT_ROWS),
    "correct": (CORRECT_OUTER, CORRECT_ROWS),
    "untouched": (None, None),
    "copy_a": (VERBOSE_OUTER, VERBOSE_ROWS),
    "copy_b": (renamed(VERBOSE_OUTER), renamed(VERBOSE_ROWS)),
    "paster": ("<pasted>", "while True:\n        pass"),
}

# What the report must recover.
SUBMITTED = {"outer": 10, "normalize_rows": 10}
ATTEMPTED = {"outer": 8, "normalize_rows": 9}           # n1 and untouched left outer; untouched both
PASSED = {"outer": 4, "normalize_rows": 7}              # correct, copy_a, copy_b, paster; all but n1, untouched, paster
MUTANTS = {"outer": {OUTER_MUTANT: ["m1", "m2", "m3"]}, "normalize_rows": {ROWS_MUTANT: ["n1"]}}
UNEXPLAINED = {"outer": ["odd"], "normalize_rows": []}
TIMEOUTS = {"outer": 0, "normalize_rows": 1}            # paster's loop
PAIRS = {("copy_a", "copy_b"), ("paster", "library:tensorcraft/einstein/loops.py")}
NEED_HELP = {"untouched", "n1"}                          # 0 points each; everyone else has half or more


def write_class(folder: Path) -> Path:
    for learner, (outer, rows) in LEARNERS.items():
        notebook = submission(outer if outer != "<pasted>" else None, rows)
        if outer == "<pasted>":
            for cell in notebook.cells:
                if cell.metadata.get("nbgrader", {}).get("grade_id") == "outer":
                    cell.source = pasted_from_the_library()
        (folder / learner).mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook, folder / learner / "00_welcome.ipynb")
    return folder
