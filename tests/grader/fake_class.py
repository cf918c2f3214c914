"""A small fake class of notebook-00 submissions, one learner per way of handing in."""
import copy
from pathlib import Path

import nbformat

from grader.course import NOTEBOOKS

CORRECT_OUTER = "return a[:, None] * b[None, :]"
CORRECT_ROWS = "return x / x.sum(dim=1, keepdim=True)"

# learner -> (outer body, normalize_rows body); None keeps the release's stubs
LEARNERS = {
    "correct": (CORRECT_OUTER, CORRECT_ROWS),
    "wrong": ("return b[:, None] * a[None, :]", CORRECT_ROWS),
    "untouched": None,
    "raises": ("raise ValueError('oops')", CORRECT_ROWS),
    "loops": ("while True:\n        pass", CORRECT_ROWS),
    "kills": ("import os\n    os.kill(os.getpid(), 9)", CORRECT_ROWS),
    "cheats": "empties the test cells",
    "rebinds": ("raise NotImplementedError()\n\n\ncheck_outer = lambda fn, hidden=False: None", CORRECT_ROWS),
    "memorises": "fixes the hidden seed and hard-codes the answers to the cases it draws",
}
# learner -> {grade_id: points}, what nbgrader must record
EXPECTED = {
    "correct": {"outer_tests": 2, "normalize_rows_tests": 2},
    "wrong": {"outer_tests": 0, "normalize_rows_tests": 2},
    "untouched": {"outer_tests": 0, "normalize_rows_tests": 0},
    "raises": {"outer_tests": 0, "normalize_rows_tests": 2},
    "loops": {"outer_tests": 0, "normalize_rows_tests": 2},       # the timeout interrupts, the kernel lives on
    "kills": {"outer_tests": 0, "normalize_rows_tests": 0},       # the kernel is gone: later cells score 0
    "cheats": {"outer_tests": 0, "normalize_rows_tests": 0},      # test cells are restored before running
    "rebinds": {"outer_tests": 0, "normalize_rows_tests": 2},     # the hidden test imports the real check
    "memorises": {"outer_tests": 0, "normalize_rows_tests": 2},   # grading ignores the seed it set
}
HIDDEN_SOURCE = ("BEGIN HIDDEN TESTS", "check_outer(outer, hidden=True)",
                 "check_normalize_rows(normalize_rows, hidden=True)", "the grader's own")


def submission(outer_body: str | None, rows_body: str | None) -> nbformat.NotebookNode:
    notebook = nbformat.read(NOTEBOOKS / "00_welcome.ipynb", as_version=4)
    notebook = copy.deepcopy(notebook)
    for cell in notebook.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id == "outer" and outer_body:
            cell.source = f"def outer(a, b):\n    {outer_body}\n"
        if grade_id == "normalize_rows" and rows_body:
            cell.source = f"def normalize_rows(x):\n    {rows_body}\n"
    return notebook


def cheating_submission() -> nbformat.NotebookNode:
    """The stubs left in place, and every test cell emptied so that it cannot fail."""
    notebook = submission(None, None)
    for cell in notebook.cells:
        if cell.metadata.get("nbgrader", {}).get("grade"):
            cell.source = "pass"
    return notebook


MEMORISING_OUTER = '''import os
os.environ["TENSORCRAFT_CHECK_SEED"] = "5"
from grader.checks.nb00_welcome import OUTER
_cases = [case.args for group in OUTER.public() + OUTER.hidden(torch.Generator().manual_seed(5)) for case in group.cases]
_answers = {(tuple(a.tolist()), tuple(b.tolist())): a[:, None] * b[None, :] for a, b in _cases}


def outer(a, b):
    return _answers[(tuple(a.tolist()), tuple(b.tolist()))].clone()
'''


def memorising_submission() -> nbformat.NotebookNode:
    """Sets TENSORCRAFT_CHECK_SEED in its own cell and answers only the cases that seed draws."""
    notebook = submission(None, CORRECT_ROWS)
    for cell in notebook.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "outer":
            cell.source = MEMORISING_OUTER
    return notebook


def write_class(folder: Path, learners: tuple[str, ...] = tuple(LEARNERS)) -> Path:
    for learner in learners:
        bodies = LEARNERS[learner]
        (folder / learner).mkdir(parents=True, exist_ok=True)
        if learner == "cheats":
            notebook = cheating_submission()
        elif learner == "memorises":
            notebook = memorising_submission()
        else:
            notebook = submission(*(bodies or (None, None)))
        nbformat.write(notebook, folder / learner / "00_welcome.ipynb")
    return folder
